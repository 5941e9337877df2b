export {
  GenericSemaphore,
  type PermitRequest,
  type SemaphoreAdapter,
  type SemaphoreContext,
} from './core.js';
export { withDeadline } from './deadline.js';
export { SemaphoreLimitMismatchError } from './errors.js';
export { createTenantLimiter, type TenantLimiter, type TenantLimiterOptions } from './tenant-limiter.js';
export type {
  DelayedPermits,
  Permit,
  PermitOptions,
  Semaphore,
  SemaphoreHolder,
  SemaphoreInfo,
  SemaphoreOptions,
} from './types.js';
export { MAX_SEMAPHORE_LIMIT } from './validate.js';
