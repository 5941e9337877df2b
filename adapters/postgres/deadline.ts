import { callWithin } from '../../src/deadline.js';

/**
 * callWithin for PostgreSQL's calls, in the argument order its call sites use: settles like `work`,
 * unless `signal` aborts first or `ms` pass first. Whoever gives up on `work` owns its clean-up.
 */
export function within<T>(work: Promise<T>, ms: number, what: string, signal?: AbortSignal): Promise<T> {
  return callWithin(work, { timeoutMs: ms, signal, what, backend: 'postgres' });
}
