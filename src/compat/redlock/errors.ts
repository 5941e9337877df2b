/**
 * redlock's error classes. v4 code catches `LockError`, v5 code `ExecutionError`; one failure is
 * both (ExecutionError extends LockError). `ResourceLockedError` is the vote against a resource
 * somebody else holds, found in an ExecutionError's `attempts`, as in redlock v5.
 */

/** redlock's error for a failed acquire, extend or release, as v4 code catches it. */
export class LockError extends Error {
  constructor(
    message: string,
    readonly attempts: ReadonlyArray<Promise<ExecutionStats>> = [],
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'LockError';
  }
}

/** redlock v5's error for a failed acquire, extend or release; it is a `LockError` too, for v4's code. */
export class ExecutionError extends LockError {
  constructor(
    message: string,
    attempts: ReadonlyArray<Promise<ExecutionStats>> = [],
    options?: { cause?: unknown },
  ) {
    super(message, attempts, options);
    this.name = 'ExecutionError';
  }
}

/** redlock v5's vote against a resource somebody else holds, found in an ExecutionError's `attempts`. */
export class ResourceLockedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResourceLockedError';
  }
}

/** One attempt's votes, in redlock v5's shape; the facade has one member: its provider. */
export interface ExecutionStats {
  readonly membershipSize: number;
  readonly quorumSize: number;
  readonly votesFor: Set<unknown>;
  readonly votesAgainst: Map<unknown, Error>;
}

/** The one attempt of a failed operation: the provider voted against it with `error`. */
export function failedAttempt(provider: unknown, error: Error): Promise<ExecutionStats> {
  return Promise.resolve({
    membershipSize: 1,
    quorumSize: 1,
    votesFor: new Set(),
    votesAgainst: new Map([[provider, error]]),
  });
}

export function grantedAttempt(provider: unknown): Promise<ExecutionStats> {
  return Promise.resolve({
    membershipSize: 1,
    quorumSize: 1,
    votesFor: new Set([provider]),
    votesAgainst: new Map(),
  });
}
