import { FencekitError } from '../errors.js';

/**
 * `SEMAPHORE_LIMIT_MISMATCH`: the name is already used with another limit (by another process, or an older deployment): refusing
 * is the only safe answer, since honouring either limit silently over-grants against the other.
 */
export class SemaphoreLimitMismatchError extends FencekitError<'SEMAPHORE_LIMIT_MISMATCH'> {
  /** The semaphore's name (`name` is the error class's). */
  readonly semaphore: string;
  /** The limit this call asked for. */
  readonly limit: number;
  /** The limit the semaphore already has. */
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
