import { InvalidArgumentError } from '../errors.js';
import { type ValidAcquireOptions, validateAcquireOptions, validateKey } from '../validate.js';
import type { PermitOptions, SemaphoreOptions } from './types.js';

/** Most permits one name may have: a slot table or a ZSET of this size is still cheap to scan. */
export const MAX_SEMAPHORE_LIMIT = 10_000;

export function validateSemaphoreName(name: unknown): string {
  return validateKey(name, 'name');
}

export function validateLimit(options: SemaphoreOptions | undefined): number {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('options', 'expected { limit }');
  }
  const { limit } = options;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_SEMAPHORE_LIMIT) {
    throw new InvalidArgumentError(
      'limit',
      `expected an integer 1..${MAX_SEMAPHORE_LIMIT}, got ${String(limit)}`,
    );
  }
  return limit;
}

export interface ValidPermitOptions extends ValidAcquireOptions {
  permits: number;
}

/** The lock options plus `permits` (an integer 1..limit: more could never be granted). */
export function validatePermitOptions(
  opts: PermitOptions | undefined,
  limit: number,
  defaults: { ttlMs: number; waitMs: number; ttlGiven?: boolean },
): ValidPermitOptions {
  if (opts !== undefined && (typeof opts !== 'object' || opts === null)) {
    throw new InvalidArgumentError('options', 'expected an object');
  }
  const { permits = 1, ...rest } = opts ?? {};
  if (typeof permits !== 'number' || !Number.isInteger(permits) || permits < 1 || permits > limit) {
    throw new InvalidArgumentError(
      'permits',
      `expected an integer 1..${limit} (the limit), got ${String(permits)}`,
    );
  }
  const options = validateAcquireOptions(opts === undefined ? undefined : rest, defaults);
  return { ...options, permits };
}
