import type { LockProvider } from '../../types.js';
import type { ConformanceTarget, TestApi } from '../target.js';

/** What each part of the lock conformance suite is given: the target, the test API, a provider opener. */
export interface LockSuite {
  target: ConformanceTarget;
  t: TestApi;
  /** A new provider of the target, closed after each test. */
  open(): Promise<LockProvider>;
  /** The lease every acquire of the suite asks for. */
  ttl: { ttlMs: number };
}

/** The provider's call deadline (BaseLockProvider's callTimeoutMs), 5 s where it says none. */
export function callTimeoutOf(provider: LockProvider): number {
  const ms = (provider as unknown as { callTimeoutMs?: unknown }).callTimeoutMs;
  return typeof ms === 'number' ? ms : 5_000;
}

/**
 * Records the cancel signal of every request a provider built on BaseLockProvider makes (its
 * protected `request`), to check that waits take their listeners back. Other providers: undefined.
 */
export function recordCancelSignals(provider: LockProvider): Set<AbortSignal> | undefined {
  const target = provider as unknown as { request?: (req: unknown, cancel: AbortSignal) => unknown };
  const request = target.request;
  if (typeof request !== 'function') return undefined;
  const signals = new Set<AbortSignal>();
  target.request = (req, cancel) => {
    signals.add(cancel);
    return request.call(provider, req, cancel);
  };
  return signals;
}
