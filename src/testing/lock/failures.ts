import assert from 'node:assert/strict';
import type { LockLostError } from '../../errors.js';
import {
  assertCutOffWaitsEnd,
  rejectsWith,
  releaseStale,
  sleep,
  uniqueKey,
  waitersReach,
} from '../helpers.js';
import { callTimeoutOf, type LockSuite } from './suite.js';

/** Faults, where the target injects them: a crashed holder's key is free within its bound; a cut-off holder is told before anyone else is granted; waits and close() stay bounded. */
export function describeFailures({ t, open, ttl, target }: LockSuite): void {
  const faults = target.faults;
  t.describe('failures', () => {
    if (faults) {
      t.it('liveness: a crashed holder’s key is free within its TTL / session timeout', async () => {
        const [a, b] = [await open(), await open()];
        const key = uniqueKey('liveness');
        const lock = await a.acquire(key, ttl);
        await faults.crash(a);
        const started = performance.now();
        const next = await b.acquire(key, { ...ttl, waitMs: target.holderDeathBoundMs });
        assert.ok(next.fencingToken > lock.fencingToken);
        assert.ok(performance.now() - started <= target.holderDeathBoundMs);
        await next.release();
      });
    }

    const partition = faults?.partition;
    if (partition) {
      t.it('early loss signal: a cut-off holder’s signal aborts before anyone else is granted', async () => {
        const [a, b] = [await open(), await open()];
        const key = uniqueKey('early-loss');
        const lock = await a.acquire(key, ttl);
        let abortedAt = Number.NaN;
        lock.signal.addEventListener('abort', () => {
          abortedAt = performance.now();
        });
        const waiting = b.acquire(key, { ...ttl, waitMs: target.holderDeathBoundMs });
        await waitersReach(b, key, 1);
        await partition(a, true);
        const next = await waiting;
        const grantedAt = performance.now();
        assert.ok(lock.signal.aborted, 'the old holder was told before the new grant');
        assert.ok(abortedAt < grantedAt);
        const reason = lock.signal.reason as LockLostError;
        assert.equal(reason.code, 'LOCK_LOST');
        assert.ok(['unconfirmed', 'session-lost', 'connection-lost', 'expired'].includes(reason.reason));
        assert.ok(next.fencingToken > lock.fencingToken);
        await partition(a, false);
        // The stale holder's release after healing must not remove the new grant.
        await releaseStale(lock);
        assert.ok(next.held);
        assert.equal((await b.inspect(key))?.holder?.fencingToken, next.fencingToken);
        await next.release();
      });

      t.it('cut off: waitMs is honoured and the wait ends with a timeout or unavailable', async () => {
        const [a, b] = [await open(), await open()];
        const key = uniqueKey('cut-wait');
        const lock = await a.acquire(key, ttl);
        await b.inspect(key); // b has reached the backend
        await partition(b, true);
        try {
          await assertCutOffWaitsEnd((options) => b.acquire(key, { ...ttl, ...options }));
        } finally {
          await partition(b, false);
        }
        await lock.release();
      });

      t.it('cut off: a waiting acquire rides through an outage shorter than its waitMs', async () => {
        const [a, b] = [await open(), await open()];
        const key = uniqueKey('ride-through');
        const lock = await a.acquire(key, ttl);
        // Settled from the start: an early failure is reported as this test's, not as unhandled.
        const waiting = b.acquire(key, { ...ttl, waitMs: 30_000 }).then(
          (granted) => ({ granted, error: undefined }),
          (error: unknown) => ({ granted: undefined, error }),
        );
        await waitersReach(a, key, 1);
        // Longer than one call's deadline: b's calls fail meanwhile and must be retried.
        await partition(b, true);
        await sleep(callTimeoutOf(b) + 500);
        await partition(b, false);
        await lock.release();
        const { granted: next, error } = await waiting;
        if (!next) throw error;
        assert.ok(next.held && next.fencingToken > lock.fencingToken);
        await next.release();
      });

      t.it(
        'cut off: close() returns within callTimeoutMs + 1 s, failing waiters and aborting signals',
        async () => {
          const [a, b] = [await open(), await open()];
          const [held, busy] = [uniqueKey('close-held'), uniqueKey('close-busy')];
          const lock = await a.acquire(held, ttl);
          const other = await b.acquire(busy, ttl);
          // Its rejection is expected during close(): handled from the start, checked after.
          const waitEnds = rejectsWith(a.acquire(busy, ttl), 'PROVIDER_CLOSED');
          await waitersReach(b, busy, 1);
          await partition(a, true);
          try {
            const started = performance.now();
            await a.close();
            const took = performance.now() - started;
            const bound = callTimeoutOf(a) + 1_000 + 500;
            assert.ok(took <= bound, `close() took ${Math.round(took)} ms (bound ${bound})`);
            assert.ok(lock.signal.aborted, 'the held lock’s signal is aborted');
            await waitEnds;
          } finally {
            await partition(a, false);
          }
          await other.release();
        },
      );
    }
  });
}
