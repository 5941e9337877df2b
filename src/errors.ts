import { processSecrets } from './secret-mask.js';

/**
 * Every error fencekit throws is a FencekitError with a stable `code`, so callers can branch on
 * `err.code` without depending on class identity (which breaks when ESM and CJS copies meet).
 */
export type ErrorCode =
  | 'LOCK_TIMEOUT'
  | 'LOCK_LOST'
  | 'NOT_HOLDER'
  | 'STALE_FENCING_TOKEN'
  | 'PROVIDER_CLOSED'
  | 'BACKEND_UNAVAILABLE'
  | 'INVALID_ARGUMENT'
  | 'ABORTED'
  | 'NOT_IMPLEMENTED'
  | 'SEMAPHORE_LIMIT_MISMATCH'
  | 'IDEMPOTENCY_MISMATCH'
  | 'IDEMPOTENCY_IN_FLIGHT'
  | 'FINAL_ERROR';

export class FencekitError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    // No error fencekit throws shows a credential it was given, in its message or its causes.
    super(
      processSecrets.text(message),
      options && 'cause' in options ? { cause: processSecrets.value(options.cause) } : options,
    );
    this.code = code;
    this.name = new.target.name;
  }
}

/** `acquire` waited `waitMs` without being granted; its queue entry has been removed. */
export class LockTimeoutError extends FencekitError {
  readonly key: string;
  readonly waitMs: number;
  constructor(key: string, waitMs: number) {
    super('LOCK_TIMEOUT', `lock "${key}" was not granted within ${waitMs} ms`);
    this.key = key;
    this.waitMs = waitMs;
  }
}

/** Why a held lock stopped being ours. Also the `reason` of an aborted `lock.signal`. */
export type LossReason =
  | 'released' // the holder released it (not an error for the holder, but the work must stop)
  | 'expired' // the lease ran out on the backend
  | 'unconfirmed' // renewals failed; the local deadline (lease minus safety margin) passed
  | 'session-lost' // the backend session ended (etcd lease gone, ZooKeeper session expired)
  | 'connection-lost' // the connection that holds the lock broke (PostgreSQL)
  | 'revoked' // the backend says someone else owns the key now
  | 'closed'; // the provider was closed

export class LockLostError extends FencekitError {
  readonly key: string;
  readonly reason: LossReason;
  readonly fencingToken: bigint;
  constructor(key: string, fencingToken: bigint, reason: LossReason, options?: { cause?: unknown }) {
    super('LOCK_LOST', `lock "${key}" (token ${fencingToken}) is no longer held: ${reason}`, options);
    this.key = key;
    this.reason = reason;
    this.fencingToken = fencingToken;
  }
}

export class NotHolderError extends FencekitError {
  readonly key: string;
  constructor(key: string, detail = 'this grant no longer holds it') {
    super('NOT_HOLDER', `not the holder of lock "${key}": ${detail}`);
    this.key = key;
  }
}

/** The storage has already accepted a write with a higher fencing token: this writer is stale. */
export class StaleFencingTokenError extends FencekitError {
  readonly resource: string;
  readonly token: bigint;
  readonly highestAccepted: bigint;
  constructor(resource: string, token: bigint, highestAccepted: bigint) {
    super(
      'STALE_FENCING_TOKEN',
      `write to "${resource}" rejected: fencing token ${token} is lower than ${highestAccepted}, already accepted`,
    );
    this.resource = resource;
    this.token = token;
    this.highestAccepted = highestAccepted;
  }
}

export class ProviderClosedError extends FencekitError {
  constructor(backend: string) {
    super('PROVIDER_CLOSED', `the ${backend} lock provider is closed`);
  }
}

export class BackendUnavailableError extends FencekitError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BACKEND_UNAVAILABLE', message, options);
  }
}

/** Bad input: says which argument and why. */
export class InvalidArgumentError extends FencekitError {
  readonly argument: string;
  constructor(argument: string, why: string) {
    super('INVALID_ARGUMENT', `invalid ${argument}: ${why}`);
    this.argument = argument;
  }
}

/** Waiting was cancelled through the caller's AbortSignal; `cause` is the signal's reason. */
export class AbortError extends FencekitError {
  constructor(what: string, reason: unknown) {
    super('ABORTED', `${what} was aborted`, { cause: reason });
    this.name = 'AbortError';
  }
}

export class NotImplementedError extends FencekitError {
  constructor(what: string) {
    super('NOT_IMPLEMENTED', `${what} is not implemented yet`);
  }
}
