import { FencekitError } from '../errors.js';

/**
 * The name is already used with another limit (by another process, or an older deployment): refusing
 * is the only safe answer, since honouring either limit silently over-grants against the other.
 */
export class SemaphoreLimitMismatchError extends FencekitError {
  /** The semaphore's name (`name` is the error class's). */
  readonly semaphore: string;
  readonly limit: number;
  readonly storedLimit: number;
  constructor(name: string, limit: number, storedLimit: number) {
    super(
      'SEMAPHORE_LIMIT_MISMATCH',
      `semaphore "${name}" is used with limit ${storedLimit}; this one asked for ${limit}`,
    );
    this.semaphore = name;
    this.limit = limit;
    this.storedLimit = storedLimit;
  }
}
