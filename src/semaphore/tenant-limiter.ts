import { InvalidArgumentError } from '../errors.js';
import type { LockProvider } from '../types.js';
import { validateKey } from '../validate.js';
import type { Permit, PermitOptions } from './types.js';
import { validateLimit } from './validate.js';

/** Options of {@link createTenantLimiter}. */
export interface TenantLimiterOptions {
  /** Jobs of one tenant running at once, across every process that uses the same prefix. */
  limit: number;
  /** Semaphore names are `${prefix}${tenant}`. Default 'tenants/'. */
  prefix?: string;
}

/** At most `limit` jobs per tenant at once; made by {@link createTenantLimiter}. */
export interface TenantLimiter {
  readonly limit: number;
  /**
   * Runs fn once a permit of the tenant's semaphore is granted (waiting up to opts.waitMs), then
   * releases it. One tenant's backlog waits in its own queue: it never delays another tenant.
   */
  run<T>(tenant: string, fn: (permit: Permit) => Promise<T>, opts?: PermitOptions): Promise<T>;
}

/** "At most `limit` jobs per tenant at once": one semaphore per tenant, over any provider. */
export function createTenantLimiter(provider: LockProvider, options: TenantLimiterOptions): TenantLimiter {
  if (typeof provider?.semaphore !== 'function') {
    throw new InvalidArgumentError('provider', 'it has no semaphore(): a fencekit provider is needed');
  }
  const limit = validateLimit(options);
  const prefix = options.prefix ?? 'tenants/';
  if (typeof prefix !== 'string') throw new InvalidArgumentError('prefix', 'expected a string');
  const semaphore = provider.semaphore.bind(provider);
  return {
    limit,
    run(tenant, fn, opts) {
      if (typeof tenant !== 'string' || tenant === '') {
        return Promise.reject(new InvalidArgumentError('tenant', 'expected a non-empty string'));
      }
      try {
        // Semaphores are cheap handles: one per call keeps nothing per tenant in this process.
        return semaphore(validateKey(`${prefix}${tenant}`, 'tenant'), { limit }).withPermit(fn, opts);
      } catch (error) {
        return Promise.reject(error);
      }
    },
  };
}
