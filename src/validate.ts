import { InvalidArgumentError } from './errors.js';
import type { AcquireOptions } from './types.js';

/** Longest key in UTF-8 bytes: leaves room under etcd/ZooKeeper/Redis path limits for prefixes. */
export const MAX_KEY_BYTES = 512;
/** Longest `owner` text in UTF-8 bytes. */
export const MAX_OWNER_BYTES = 1024;
/** Shortest lease: below this, one slow round trip eats the whole lease. */
export const MIN_TTL_MS = 50;
/** Longest lease: 24 h. A longer TTL only delays recovery from a dead holder. */
export const MAX_TTL_MS = 86_400_000;
/** Longest lock-delay: a name kept from everybody longer than a minute after a loss is an outage. */
export const MAX_LOCK_DELAY_MS = 60_000;

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
export const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Segments reserved after a name's first one. On ZooKeeper a name is a folder and a semaphore `s`
 * keeps its mutex in `s/locks` and its leases in `s/leases` (Curator's InterProcessSemaphoreV2
 * layout, kept for interop): a lock, election or semaphore named `s/leases` or `s/leases/x` would put
 * nodes in that folder and be counted as permits, one named `s/locks` would queue in its mutex. They
 * are refused for every call that creates nodes, on every backend, so that a name valid on one
 * backend is valid on all. Calls that only read or remove what exists (inspect, forceRelease) take
 * them where they cannot reach a semaphore's nodes, that is everywhere but on ZooKeeper: a name
 * granted before the rule, or a tenant id that happens to be "leases", stays reachable there.
 */
const RESERVED_SEGMENTS = new Set(['locks', 'leases']);
/** Curator's protected node names (`_c_<uuid>-lock-<seq>`): as a folder, one would pass for a queue node. */
const QUEUE_NODE_NAME = /^_c_[0-9a-f-]{36}-/;

/**
 * Keys are '/'-separated names. Every backend maps them to paths or key prefixes, so the rules are the
 * strictest common ones: no control characters, no empty, '.' or '..' segments (path tricks), no
 * leading or trailing '/', no segment that is a recipe's node name on ZooKeeper (RESERVED_SEGMENTS,
 * QUEUE_NODE_NAME; `allowReserved` lifts this one rule, for reads and removals where no such node
 * can be reached), at most MAX_KEY_BYTES.
 */
export function validateKey(
  key: unknown,
  argument = 'key',
  { allowReserved = false }: { allowReserved?: boolean } = {},
): string {
  if (typeof key !== 'string')
    throw new InvalidArgumentError(argument, `expected a string, got ${typeof key}`);
  if (key.length === 0) throw new InvalidArgumentError(argument, 'must not be empty');
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_KEY_BYTES) {
    throw new InvalidArgumentError(argument, `is ${bytes} bytes long; the limit is ${MAX_KEY_BYTES}`);
  }
  if (CONTROL_CHARS.test(key)) throw new InvalidArgumentError(argument, 'contains a control character');
  if (key !== key.trim()) throw new InvalidArgumentError(argument, 'starts or ends with white space');
  const segments = key.split('/');
  for (const [index, segment] of segments.entries()) {
    if (segment === '') throw new InvalidArgumentError(argument, `"${key}" has an empty path segment`);
    if (segment === '.' || segment === '..') {
      throw new InvalidArgumentError(argument, `"${key}" has a "${segment}" path segment`);
    }
    if (allowReserved) continue;
    if (index > 0 && RESERVED_SEGMENTS.has(segment)) {
      throw new InvalidArgumentError(
        argument,
        `"${key}": "locks" and "leases" are reserved for semaphores after a name's first segment (a semaphore "${segments.slice(0, index).join('/')}" keeps its mutex and permits there)`,
      );
    }
    if (QUEUE_NODE_NAME.test(segment)) {
      throw new InvalidArgumentError(
        argument,
        `"${key}" has a segment "${segment}" in the form of a queue node's name (_c_<uuid>-…), which is reserved`,
      );
    }
  }
  return key;
}

export function validateTtlMs(ttlMs: unknown, argument = 'ttlMs'): number {
  if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs)) {
    throw new InvalidArgumentError(
      argument,
      `expected a finite number of milliseconds, got ${String(ttlMs)}`,
    );
  }
  if (ttlMs < MIN_TTL_MS || ttlMs > MAX_TTL_MS) {
    throw new InvalidArgumentError(argument, `${ttlMs} is outside ${MIN_TTL_MS}..${MAX_TTL_MS} ms`);
  }
  return Math.round(ttlMs);
}

export function validateWaitMs(waitMs: unknown): number {
  if (waitMs === Number.POSITIVE_INFINITY) return waitMs;
  if (typeof waitMs !== 'number' || Number.isNaN(waitMs) || waitMs < 0 || waitMs > Number.MAX_SAFE_INTEGER) {
    throw new InvalidArgumentError(
      'waitMs',
      `expected 0, a number of ms up to Number.MAX_SAFE_INTEGER, or Infinity, got ${String(waitMs)}`,
    );
  }
  return waitMs;
}

export function validateLockDelayMs(lockDelayMs: unknown): number {
  if (lockDelayMs === undefined) return 0;
  if (
    typeof lockDelayMs !== 'number' ||
    !Number.isFinite(lockDelayMs) ||
    lockDelayMs < 0 ||
    lockDelayMs > MAX_LOCK_DELAY_MS
  ) {
    throw new InvalidArgumentError(
      'lockDelayMs',
      `expected 0..${MAX_LOCK_DELAY_MS} ms, got ${String(lockDelayMs)}`,
    );
  }
  return Math.ceil(lockDelayMs);
}

export function validateOwner(owner: unknown): string | undefined {
  if (owner === undefined) return undefined;
  if (typeof owner !== 'string')
    throw new InvalidArgumentError('owner', `expected a string, got ${typeof owner}`);
  if (Buffer.byteLength(owner, 'utf8') > MAX_OWNER_BYTES) {
    throw new InvalidArgumentError('owner', `longer than ${MAX_OWNER_BYTES} bytes`);
  }
  return owner;
}

export function validateSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) throw new InvalidArgumentError('signal', 'expected an AbortSignal');
  return signal;
}

export interface ValidAcquireOptions {
  ttlMs: number;
  /** Whether ttlMs was given (by the acquire or the provider's options), not the built-in default. */
  ttlGiven: boolean;
  waitMs: number;
  signal: AbortSignal | undefined;
  owner: string | undefined;
  /** 0 = no lock-delay. */
  lockDelayMs: number;
}

const KNOWN_OPTIONS = new Set(['ttlMs', 'waitMs', 'signal', 'owner', 'lockDelayMs']);

/** Checks options once for every backend; unknown names are refused so a typo is not silently ignored. */
export function validateAcquireOptions(
  opts: AcquireOptions | undefined,
  defaults: { ttlMs: number; waitMs: number; ttlGiven?: boolean },
): ValidAcquireOptions {
  const defaultTtlGiven = defaults.ttlGiven ?? false;
  if (opts === undefined)
    return {
      ttlMs: defaults.ttlMs,
      waitMs: defaults.waitMs,
      ttlGiven: defaultTtlGiven,
      signal: undefined,
      owner: undefined,
      lockDelayMs: 0,
    };
  if (typeof opts !== 'object' || opts === null)
    throw new InvalidArgumentError('options', 'expected an object');
  for (const name of Object.keys(opts)) {
    if (!KNOWN_OPTIONS.has(name)) throw new InvalidArgumentError('options', `unknown option "${name}"`);
  }
  return {
    ttlMs: opts.ttlMs === undefined ? defaults.ttlMs : validateTtlMs(opts.ttlMs),
    ttlGiven: opts.ttlMs !== undefined || defaultTtlGiven,
    waitMs: opts.waitMs === undefined ? defaults.waitMs : validateWaitMs(opts.waitMs),
    signal: validateSignal(opts.signal),
    owner: validateOwner(opts.owner),
    lockDelayMs: validateLockDelayMs(opts.lockDelayMs),
  };
}
