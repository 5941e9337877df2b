/**
 * Locks with fencing tokens: `connect`, the memory provider, elections, singletons, semaphores,
 * errors and the fenced store. Tools for writing a provider of your own are in
 * `fencekit/provider-kit`, the conformance suites in `fencekit/testing`.
 * @module fencekit
 */
export {
  type ConnectedProvider,
  type ConnectedSemaphoreProvider,
  connect,
  type SemaphoreBackendUrl,
} from './connect.js';
export type { ConnectOptions } from './connect-options.js';
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
  AuthenticationError,
  BackendUnavailableError,
  type ErrorCode,
  FencekitError,
  type FencekitErrorCode,
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
  TtlIgnored,
} from './events.js';
export { FencedStore } from './fencing/fenced-store.js';
export type {
  AcquireOptions,
  BackendName,
  HolderInfo,
  Lock,
  LockInfo,
  QueuedWaiter,
  QueueOptions,
} from './lock-types.js';
export { MemoryLockProvider, type MemoryProviderOptions, memoryServer } from './memory/provider.js';
export type { ProviderDefaults } from './provider-base.js';
export type { DelayedGrant, ReadOptions, ReadWriteInfo, ReadWriteLock } from './read-write/types.js';
export {
  createTenantLimiter,
  type DelayedPermits,
  MAX_SEMAPHORE_LIMIT,
  type Permit,
  type PermitOptions,
  type Semaphore,
  type SemaphoreHolder,
  type SemaphoreInfo,
  SemaphoreLimitMismatchError,
  type SemaphoreOptions,
  type TenantLimiter,
  type TenantLimiterOptions,
} from './semaphore/index.js';
export { METRIC_NAMES } from './telemetry/instruments.js';
export type { FencekitLogger } from './telemetry/logger.js';
export type { GrantKind, TelemetryOptions, WaitOutcome } from './telemetry/telemetry.js';
export type { Pem, TlsOptions } from './tls.js';
export type { ForceReleaseOptions, LockProvider } from './types.js';
export { MAX_KEY_BYTES, MAX_OWNER_BYTES, MAX_TTL_MS, MIN_TTL_MS } from './validate.js';
