import { InvalidArgumentError } from '../errors.js';
import { validateSignal, validateWaitMs } from '../validate.js';

/** Longest key in bytes, as Stripe allows (255 characters). */
export const MAX_IDEMPOTENCY_KEY_BYTES = 255;
/** Default lease of an in-flight record: a request that neither finishes nor renews by then is taken over. */
export const DEFAULT_LEASE_MS = 30_000;
/** Default retention of a record, as Stripe keeps keys: 24 h. */
export const DEFAULT_RETENTION_MS = 86_400_000;
const MIN_LEASE_MS = 100;
const MAX_RETENTION_MS = 30 * 86_400_000;

// Visible ASCII and the space: what an HTTP header (sf-string) can carry without escaping tricks.
const PRINTABLE = /^[\x20-\x7e]+$/;

export function validateIdempotencyKey(key: unknown): string {
  if (typeof key !== 'string') throw new InvalidArgumentError('key', `expected a string, got ${typeof key}`);
  if (key.length === 0) throw new InvalidArgumentError('key', 'must not be empty');
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_IDEMPOTENCY_KEY_BYTES)
    throw new InvalidArgumentError(
      'key',
      `is ${bytes} bytes long; the limit is ${MAX_IDEMPOTENCY_KEY_BYTES}`,
    );
  if (!PRINTABLE.test(key))
    throw new InvalidArgumentError('key', 'may hold only printable ASCII characters (0x20-0x7E)');
  if (key !== key.trim()) throw new InvalidArgumentError('key', 'starts or ends with white space');
  return key;
}

/** Options of one `store.run`, and the store's `defaults`. */
export interface RunOptions {
  /** How long a run may go without renewing before a repeat takes it over (renewed every leaseMs/3). */
  leaseMs?: number;
  /** How long the record (and its result) is kept after it was created. At least leaseMs. */
  retentionMs?: number;
  /** Wait up to this long for an in-flight first run instead of failing with IdempotencyInFlightError. */
  waitMs?: number;
  /** Cancels waiting and the store calls; passed on to fn (aborted also when the lease is lost). */
  signal?: AbortSignal;
}

export interface ValidRunOptions {
  leaseMs: number;
  retentionMs: number;
  waitMs: number;
  signal: AbortSignal | undefined;
}

const KNOWN = new Set(['leaseMs', 'retentionMs', 'waitMs', 'signal']);

function ms(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max)
    throw new InvalidArgumentError(name, `expected ${min}..${max} ms, got ${String(value)}`);
  return Math.round(value);
}

export function validateRunOptions(opts: RunOptions | undefined, defaults: RunOptions): ValidRunOptions {
  if (opts !== undefined && (typeof opts !== 'object' || opts === null))
    throw new InvalidArgumentError('options', 'expected an object');
  for (const name of Object.keys(opts ?? {}))
    if (!KNOWN.has(name)) throw new InvalidArgumentError('options', `unknown option "${name}"`);
  // An option given as undefined keeps the store's default.
  const given = Object.fromEntries(Object.entries(opts ?? {}).filter(([, v]) => v !== undefined));
  const merged: RunOptions = { ...defaults, ...given };
  const leaseMs = ms('leaseMs', merged.leaseMs ?? DEFAULT_LEASE_MS, MIN_LEASE_MS, MAX_RETENTION_MS);
  const retentionMs = ms('retentionMs', merged.retentionMs ?? DEFAULT_RETENTION_MS, 1, MAX_RETENTION_MS);
  if (retentionMs < leaseMs)
    throw new InvalidArgumentError(
      'retentionMs',
      `${retentionMs} ms is shorter than leaseMs (${leaseMs} ms): a record would vanish while in flight`,
    );
  const waitMs = validateWaitMs(merged.waitMs ?? 0);
  return { leaseMs, retentionMs, waitMs, signal: validateSignal(opts?.signal) };
}
