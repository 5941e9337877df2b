/**
 * Locks with fencing tokens, `connect`, the memory provider, elections, singletons, semaphores, errors and fencing helpers.
 * @module fencekit
 */
export { DEFAULT_DRIFT_RATE, safeDeadline } from './clock.js';
export {
  BACKEND_PACKAGES,
  type ConnectionSpec,
  type ConnectOptions,
  connect,
  type HostPort,
  parseConnectionUrl,
} from './connect.js';
export { createElection, LockElection, type LockElectionOptions } from './election/lock-election.js';
export { type LeaderWork, type RunAsLeaderOptions, runAsLeader } from './election/run-as-leader.js';
export {
  memoryLedger,
  runSingleton,
  type SingletonJob,
  type SingletonLedger,
  type SingletonOptions,
} from './election/singleton.js';
export type { CampaignOptions, Election, LeaderInfo, Leadership } from './election/types.js';
export {
  AbortError,
  BackendUnavailableError,
  type ErrorCode,
  FencekitError,
  InvalidArgumentError,
  LockLostError,
  LockTimeoutError,
  type LossReason,
  NotHolderError,
  NotImplementedError,
  ProviderClosedError,
  StaleFencingTokenError,
} from './errors.js';
export type {
  ProviderEventListener,
  ProviderEventMap,
  ProviderEventName,
} from './events.js';
export { FencedStore } from './fencing/fenced-store.js';
export { KeyedFifo } from './keyed-fifo.js';
export { keepRenewing, type LeasedLockInit, leasedLock, type RenewalOptions } from './lease-renewal.js';
export { MemoryLockProvider, type MemoryProviderOptions, memoryServer } from './memory/provider.js';
export { MemoryLockServer } from './memory/server.js';
export { OwnedLock, type OwnedLockInit } from './ownership.js';
export { BaseLockProvider, type LockRequest, type ProviderDefaults } from './provider-base.js';
export {
  createTenantLimiter,
  GenericSemaphore,
  MAX_SEMAPHORE_LIMIT,
  type Permit,
  type PermitOptions,
  type PermitRequest,
  type Semaphore,
  type SemaphoreAdapter,
  type SemaphoreContext,
  type SemaphoreHolder,
  type SemaphoreInfo,
  SemaphoreLimitMismatchError,
  type SemaphoreOptions,
  type TenantLimiter,
  type TenantLimiterOptions,
  withDeadline,
} from './semaphore/index.js';
export { METRIC_NAMES } from './telemetry/instruments.js';
export type { FencekitLogger } from './telemetry/logger.js';
export type { GrantKind, TelemetryOptions, WaitOutcome } from './telemetry/telemetry.js';
export type {
  AcquireOptions,
  BackendName,
  ForceReleaseOptions,
  HolderInfo,
  Lock,
  LockInfo,
  LockProvider,
} from './types.js';
export {
  MAX_KEY_BYTES,
  MAX_OWNER_BYTES,
  MAX_TTL_MS,
  MIN_TTL_MS,
  validateAcquireOptions,
  validateKey,
} from './validate.js';
