export { describeConformance } from './conformance.js';
export { ExclusionMonitor, eventually, rejectsWith, uniqueKey, waitersReach } from './helpers.js';
export type { ConformanceTarget, TestApi } from './target.js';
