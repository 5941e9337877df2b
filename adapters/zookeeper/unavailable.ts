import { BackendUnavailableError } from '../../src/errors.js';

/**
 * A failed ZooKeeper call as the caller sees it: a BackendUnavailableError that says what was being
 * done and keeps the cause. One that already is one passes through unchanged.
 */
export function unavailable(what: string, error: unknown): BackendUnavailableError {
  if (error instanceof BackendUnavailableError) return error;
  return new BackendUnavailableError(`zookeeper: ${what}: ${String((error as Error)?.message ?? error)}`, {
    cause: error,
  });
}
