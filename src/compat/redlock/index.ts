/**
 * The redlock API (v5, and v4's names) over any fencekit provider.
 * @module fencekit/compat/redlock
 */
// fencekit/compat/redlock: the redlock API (v5, and v4's names) over any fencekit provider.
export {
  ExecutionError,
  type ExecutionStats,
  LockError,
  ResourceLockedError,
} from './errors.js';
export { Lock } from './lock.js';
export { Redlock, Redlock as default, type RedlockAbortSignal, type RedlockLayout } from './redlock.js';
export type { Settings } from './settings.js';
