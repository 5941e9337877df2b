/**
 * Building blocks for a lock provider of your own: the base class with the shared acquire loop, the
 * lock handle, lease renewal, the generic semaphore and read-write lock, and the validation every
 * built-in provider uses.
 * Check the result with the suites in `fencekit/testing`.
 * @module fencekit/provider-kit
 */
export { DEFAULT_DRIFT_RATE, monotonicNow, safeDeadline } from './clock.js';
export { type ConnectionSpec, type HostPort, parseConnectionUrl } from './connection-url.js';
export type { GrantContext, GrantRequest, RecipeAdapter } from './grant-loop.js';
export { keepRenewing, type LeasedLockInit, leasedLock, type RenewalOptions } from './lease-renewal.js';
export { OwnedLock, type OwnedLockInit } from './ownership.js';
export { BaseLockProvider, type LockRequest } from './provider-base.js';
export {
  type AdapterReadWriteInfo,
  GenericReadWriteLock,
  type ReadWriteAdapter,
  type ReadWriteMode,
  type ReadWriteRequest,
} from './read-write/core.js';
export {
  type AdapterSemaphoreInfo,
  GenericSemaphore,
  type PermitRequest,
  type SemaphoreAdapter,
  type SemaphoreContext,
} from './semaphore/core.js';
export { withDeadline } from './semaphore/deadline.js';
export { validateAcquireOptions, validateKey } from './validate.js';
