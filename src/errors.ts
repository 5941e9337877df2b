import { processSecrets } from './secret-mask.js';

/**
 * The `code` of every error fencekit throws. Branch on `error.code` rather than on the class: class
 * identity breaks when an ESM and a CJS copy of fencekit meet in one process, the code does not.
 * Each error class carries its own literal code, so `switch (error.code)` narrows.
 */
export type FencekitErrorCode =
  | 'LOCK_TIMEOUT'
  | 'LOCK_LOST'
  | 'NOT_HOLDER'
  | 'STALE_FENCING_TOKEN'
  | 'PROVIDER_CLOSED'
  | 'BACKEND_UNAVAILABLE'
  | 'AUTH_FAILED'
  | 'INVALID_ARGUMENT'
  | 'ABORTED'
  | 'NOT_IMPLEMENTED'
  | 'SEMAPHORE_LIMIT_MISMATCH'
  | 'IDEMPOTENCY_MISMATCH'
  | 'IDEMPOTENCY_IN_FLIGHT'
  | 'FINAL_ERROR';

/**
 * The former name of {@link FencekitErrorCode}.
 * @deprecated Use {@link FencekitErrorCode}.
 */
export type ErrorCode = FencekitErrorCode;

/**
 * The base class of every error fencekit throws. `code` is stable across versions; the message is
 * for people and may change. No message or `cause` shows a credential fencekit was given.
 * @typeParam Code - the literal code of a subclass; `FencekitErrorCode` on the base class.
 */
export class FencekitError<Code extends FencekitErrorCode = FencekitErrorCode> extends Error {
  /** What went wrong, as a stable string: see {@link FencekitErrorCode}. */
  readonly code: Code;
  /**
   * @param code - the error's stable code.
   * @param message - what happened, for people.
   * @param options - `cause`: the error this one wraps.
   */
  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    // No error fencekit throws shows a credential it was given, in its message or its causes.
    super(
      processSecrets.text(message),
      options && 'cause' in options ? { cause: processSecrets.value(options.cause) } : options,
    );
    this.code = code;
    this.name = new.target.name;
  }
}

/**
 * `LOCK_TIMEOUT`: `acquire` waited `waitMs` without being granted; its queue entry has been
 * removed, so nothing is left behind on the backend.
 */
export class LockTimeoutError extends FencekitError<'LOCK_TIMEOUT'> {
  /** The lock's key. */
  readonly key: string;
  /** How long it waited (0 for a single try). */
  readonly waitMs: number;
  constructor(key: string, waitMs: number) {
    super('LOCK_TIMEOUT', `lock "${key}" was not granted within ${waitMs} ms`);
    this.key = key;
    this.waitMs = waitMs;
  }
}

/** Why a held lock stopped being ours: the `reason` of a {@link LockLostError}. */
export type LossReason =
  | 'released' // the holder released it (not an error for the holder, but the work must stop)
  | 'expired' // the lease ran out on the backend
  | 'unconfirmed' // renewals failed and the local deadline (lease minus safety margin) passed, or (ZooKeeper) the session was ended because a node's deletion could not be confirmed
  | 'session-lost' // the backend session ended (etcd lease gone, ZooKeeper session expired)
  | 'connection-lost' // the connection that holds the lock broke (PostgreSQL)
  | 'revoked' // the backend says someone else owns the key now
  | 'closed'; // the provider was closed

/**
 * `LOCK_LOST`: a lock (or permit, or leadership) is no longer held. It is the `reason` of the
 * aborted `lock.signal`, and what a fenced operation on a lost grant throws.
 */
export class LockLostError extends FencekitError<'LOCK_LOST'> {
  /** The lock's key. */
  readonly key: string;
  /** Why it was lost. */
  readonly reason: LossReason;
  /** The token of the grant that was lost. */
  readonly fencingToken: bigint;
  constructor(key: string, fencingToken: bigint, reason: LossReason, options?: { cause?: unknown }) {
    super('LOCK_LOST', `lock "${key}" (token ${fencingToken}) is no longer held: ${reason}`, options);
    this.key = key;
    this.reason = reason;
    this.fencingToken = fencingToken;
  }
}

/** `NOT_HOLDER`: an operation needed the grant to be held, and it is not (any more). */
export class NotHolderError extends FencekitError<'NOT_HOLDER'> {
  /** The lock's key. */
  readonly key: string;
  constructor(key: string, detail = 'this grant no longer holds it') {
    super('NOT_HOLDER', `not the holder of lock "${key}": ${detail}`);
    this.key = key;
  }
}

/**
 * `STALE_FENCING_TOKEN`: the storage has already accepted a write with a higher fencing token, so
 * this writer's lock has passed to someone else and its write is refused.
 */
export class StaleFencingTokenError extends FencekitError<'STALE_FENCING_TOKEN'> {
  /** What the write was for (a key of the store). */
  readonly resource: string;
  /** The refused write's token. */
  readonly token: bigint;
  /** The highest token the storage has accepted for `resource`. */
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

/** `PROVIDER_CLOSED`: the provider was closed; what waited on it fails with this error. */
export class ProviderClosedError extends FencekitError<'PROVIDER_CLOSED'> {
  constructor(backend: string) {
    super('PROVIDER_CLOSED', `the ${backend} lock provider is closed`);
  }
}

/**
 * `BACKEND_UNAVAILABLE`: the backend did not answer within `callTimeoutMs`, could not be reached,
 * or its client package is not installed (the message names it).
 */
export class BackendUnavailableError extends FencekitError<'BACKEND_UNAVAILABLE'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BACKEND_UNAVAILABLE', message, options);
  }
}

/**
 * `AUTH_FAILED`: the backend refused who we are: a wrong user name or password, a client
 * certificate it does not accept, a server certificate we do not trust or made out for another
 * host, or an identity without the permissions fencekit needs. Retrying does not help, so a waiting
 * acquire fails at once. The message names the backend and host, never the secret.
 */
export class AuthenticationError extends FencekitError<'AUTH_FAILED'> {
  /** The backend that refused: `etcd`, `zookeeper`, `redis`, `redlock`, `postgres`. */
  readonly backend: string;
  /** The host (or hosts) it was asked of, as `host:port`. */
  readonly host: string;
  /**
   * @param backend - the backend's name.
   * @param host - where it was asked, as `host:port` (no user info).
   * @param why - what was refused, in words that quote no credential.
   */
  constructor(backend: string, host: string, why: string, options?: { cause?: unknown }) {
    super('AUTH_FAILED', `${backend} at ${host}: ${why}`, options);
    this.backend = backend;
    this.host = host;
  }
}

/** `INVALID_ARGUMENT`: bad input; the message says which argument and why. */
export class InvalidArgumentError extends FencekitError<'INVALID_ARGUMENT'> {
  /** The argument's name (`key`, `ttlMs`, `url`, …). */
  readonly argument: string;
  constructor(argument: string, why: string) {
    super('INVALID_ARGUMENT', `invalid ${argument}: ${why}`);
    this.argument = argument;
  }
}

/**
 * `ABORTED`: waiting was cancelled through the caller's `AbortSignal`; `cause` is the signal's
 * reason. Its `name` is `AbortError`, as for the platform's own aborts.
 */
export class AbortError extends FencekitError<'ABORTED'> {
  constructor(what: string, reason: unknown) {
    super('ABORTED', `${what} was aborted`, { cause: reason });
    this.name = 'AbortError';
  }
}

/**
 * `NOT_IMPLEMENTED`: the provider lacks what was asked of it (semaphores on Redlock, for example).
 */
export class NotImplementedError extends FencekitError<'NOT_IMPLEMENTED'> {
  constructor(what: string) {
    super('NOT_IMPLEMENTED', `${what} is not implemented yet`);
  }
}
