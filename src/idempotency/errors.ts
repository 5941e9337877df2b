import { FencekitError } from '../errors.js';

/** `IDEMPOTENCY_MISMATCH`: the key was first used with another payload (HTTP 422 in the IETF Idempotency-Key draft). */
export class IdempotencyMismatchError extends FencekitError<'IDEMPOTENCY_MISMATCH'> {
  readonly key: string;
  constructor(key: string) {
    super('IDEMPOTENCY_MISMATCH', `idempotency key "${key}" was first used with a different payload`);
    this.key = key;
  }
}

/** `IDEMPOTENCY_IN_FLIGHT`: the first request with this key is still running and its lease has not expired (HTTP 409). */
export class IdempotencyInFlightError extends FencekitError<'IDEMPOTENCY_IN_FLIGHT'> {
  readonly key: string;
  /** How long the running request's lease has left, by the store's clock. */
  readonly retryAfterMs: number;
  constructor(key: string, retryAfterMs: number) {
    super(
      'IDEMPOTENCY_IN_FLIGHT',
      `a request with idempotency key "${key}" is still in flight (lease ends in ${retryAfterMs} ms)`,
    );
    this.key = key;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * `FINAL_ERROR`: thrown by `fn` to say "this failure is the answer": it is stored and replayed to every repeat as a
 * FinalError with the same message, `status` and `details`. Any other error leaves the key free for
 * a retry.
 */
export class FinalError extends FencekitError<'FINAL_ERROR'> {
  readonly status: number | undefined;
  readonly details: unknown;
  /** True on the copies thrown to repeats (rebuilt from the store). */
  readonly replayed: boolean;
  constructor(message: string, options: { status?: number; details?: unknown; replayed?: boolean } = {}) {
    super('FINAL_ERROR', message);
    this.status = options.status;
    this.details = options.details;
    this.replayed = options.replayed ?? false;
  }
}
