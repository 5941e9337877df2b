/**
 * The conformance suites every fencekit provider passes, for your own provider, and an in-process
 * lock server of its own for tests that must not share `memory://`.
 * @module fencekit/testing
 */
export { MemoryLockServer } from '../memory/server.js';
export { describeConformance } from './conformance.js';
export { ExclusionMonitor, eventually, rejectsWith, uniqueKey, waitersReach } from './helpers.js';
export { PermitChecker } from './permit-checker.js';
export { describeReadWriteConformance, type ReadWriteConformanceTarget } from './read-write-conformance.js';
export { describeSemaphoreConformance } from './semaphore-conformance.js';
export type { BackendTarget, ConformanceTarget, SemaphoreConformanceTarget, TestApi } from './target.js';
