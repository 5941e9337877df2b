/**
 * The conformance suites every fencekit provider passes, for your own provider.
 * @module fencekit/testing
 */
export { describeConformance } from './conformance.js';
export { ExclusionMonitor, eventually, rejectsWith, uniqueKey, waitersReach } from './helpers.js';
export { PermitChecker } from './permit-checker.js';
export { describeSemaphoreConformance, type SemaphoreConformanceTarget } from './semaphore-conformance.js';
export type { ConformanceTarget, TestApi } from './target.js';
