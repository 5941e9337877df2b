import type { LockProvider } from '../types.js';
import { describeAdministration } from './admin-conformance.js';
import { describeFailures } from './lock/failures.js';
import { describeGrants } from './lock/grants.js';
import { describeQueue } from './lock/queue.js';
import { describeRelease } from './lock/release.js';
import type { LockSuite } from './lock/suite.js';
import { describeArgumentValidation } from './lock/validation.js';
import { describeWaiting } from './lock/waiting.js';
import { describeLockDelay } from './lock-delay-conformance.js';
import type { ConformanceTarget, TestApi } from './target.js';

/**
 * Registers the behavioural tests of the provider contract (docs/design.md) for one backend. Every provider must pass them; a
 * backend declares what it cannot be tested for (no fault injection, no FIFO) in its target.
 */
export function describeConformance(target: ConformanceTarget, t: TestApi): void {
  const opened: LockProvider[] = [];
  const open = async (): Promise<LockProvider> => {
    const provider = await target.createProvider();
    opened.push(provider);
    return provider;
  };
  const ttl = { ttlMs: target.ttlMs };

  t.describe(`conformance: ${target.name}`, () => {
    t.afterEach?.(async () => {
      await Promise.allSettled(opened.splice(0).map((p) => p.close()));
    });

    const suite: LockSuite = { target, t, open, ttl };
    describeArgumentValidation(suite);
    describeGrants(suite);
    describeWaiting(suite);
    describeQueue(suite);
    describeRelease(suite);
    describeAdministration(target, t, open);
    describeLockDelay(target, t, open);
    describeFailures(suite);
  });
}
