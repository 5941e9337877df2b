import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import type { Lock, LockProvider } from '../../types.js';
import { eventually, rejectsWith, sleep, uniqueKey, waitersReach } from '../helpers.js';
import { type LockSuite, recordCancelSignals } from './suite.js';

/** How a wait ends (a grant, waitMs, the caller's signal, close), leaving no queue entry and no listener behind. */
export function describeWaiting({ t, open, ttl, target }: LockSuite): void {
  t.describe('waiting and cancellation', () => {
    t.it('waitMs: times out with LockTimeoutError and removes its queue entry', async () => {
      const [a, b] = [await open(), await open()];
      const key = uniqueKey('timeout');
      const lock = await a.acquire(key, ttl);
      const started = performance.now();
      await rejectsWith(b.acquire(key, { ...ttl, waitMs: 150 }), 'LOCK_TIMEOUT');
      const waited = performance.now() - started;
      assert.ok(waited >= 140, 'did not give up before waitMs');
      // The other half of the contract: waitMs is honoured, not stretched by backend retries.
      assert.ok(waited < 150 + 1_500, `gave up only after ${Math.round(waited)} ms (waitMs 150)`);
      assert.equal((await a.inspect(key))?.waiters, 0);
      assert.ok(lock.held, 'the holder is untouched');
      await lock.release();
      assert.equal(await a.inspect(key), null, 'nothing left behind');
    });

    t.it('AbortSignal: cancels a wait with AbortError and removes its queue entry', async () => {
      const [a, b] = [await open(), await open()];
      const key = uniqueKey('abort');
      const lock = await a.acquire(key, ttl);
      const controller = new AbortController();
      const waiting = b.acquire(key, { ...ttl, signal: controller.signal });
      await waitersReach(a, key, 1);
      controller.abort(new Error('shutting down'));
      const error = await rejectsWith(waiting, 'AbortError');
      assert.equal((error.cause as Error).message, 'shutting down');
      await waitersReach(a, key, 0);
      await lock.release();
      assert.equal(await a.inspect(key), null, 'nothing left behind');
    });

    t.it('an already aborted signal fails at once without touching the backend', async () => {
      const p = await open();
      const key = uniqueKey('pre-aborted');
      await rejectsWith(p.acquire(key, { signal: AbortSignal.abort() }), 'AbortError');
      assert.equal(await p.inspect(key), null);
    });

    t.it('a cancelled waiter does not block the ones behind it', async () => {
      const [a, b, c] = [await open(), await open(), await open()];
      const key = uniqueKey('cancel-middle');
      const lock = await a.acquire(key, ttl);
      const controller = new AbortController();
      const cancelled = b.acquire(key, { ...ttl, signal: controller.signal });
      await waitersReach(a, key, 1);
      const behind = c.acquire(key, { ...ttl, waitMs: 10_000 });
      await waitersReach(a, key, 2);
      controller.abort();
      await rejectsWith(cancelled, 'AbortError');
      await lock.release();
      const granted = await behind;
      assert.ok(granted.fencingToken > lock.fencingToken);
      await granted.release();
    });

    t.it('waits leave no abort listener behind (requests share one close signal)', async () => {
      const [a, b] = [await open(), await open()];
      const signals = recordCancelSignals(b);
      if (!signals) return; // not built on BaseLockProvider: nothing to look at
      const key = uniqueKey('listeners');
      const lock = await a.acquire(key, ttl);
      const waiting = b.acquire(key, ttl); // no signal, no waitMs: the provider's shared close signal
      waiting.catch(() => undefined); // awaited below; a failed step must not leave it unhandled
      // Once b's request waits on the server, b has reached it: a short wait that runs out is then a
      // timeout, however slow the machine, not a backend that never answered.
      await waitersReach(a, key, 1);
      const controller = new AbortController();
      const aborted = b.acquire(key, { ...ttl, signal: controller.signal });
      aborted.catch(() => undefined); // awaited below
      await rejectsWith(b.acquire(key, { ...ttl, waitMs: 100 }), 'LOCK_TIMEOUT');
      await sleep(100); // both waits settle (on etcd the second one queues inside the provider)
      controller.abort();
      await rejectsWith(aborted, 'AbortError');
      await lock.release();
      await (await waiting).release();
      assert.ok(signals.size >= 2, 'the requests were seen');
      for (const signal of signals) assert.equal(getEventListeners(signal, 'abort').length, 0);
    });

    if (target.fifo) {
      t.it('FIFO: waiters are granted in request order', async () => {
        const clients = await Promise.all(Array.from({ length: 5 }, () => open()));
        const [holder, ...waiters] = clients as [LockProvider, ...LockProvider[]];
        const key = uniqueKey('fifo');
        const first = await holder.acquire(key, ttl);
        const order: number[] = [];
        const done: Promise<void>[] = [];
        for (const [index, waiter] of waiters.entries()) {
          done.push(
            waiter.acquire(key, { ...ttl, waitMs: 20_000 }).then(async (lock) => {
              order.push(index);
              await sleep(5);
              await lock.release();
            }),
          );
          await waitersReach(holder, key, index + 1);
        }
        await first.release();
        await Promise.all(done);
        assert.deepEqual(order, [0, 1, 2, 3]);
      });
    }

    if (target.wakeups) {
      const wakeups = target.wakeups;
      t.it('no herd: each release wakes at most one of many waiters', async () => {
        const clients = await Promise.all(Array.from({ length: 7 }, () => open()));
        const [holder, ...waiters] = clients as [LockProvider, ...LockProvider[]];
        const key = uniqueKey('herd');
        const lock = await holder.acquire(key, ttl);
        const granted: Lock[] = [];
        for (const waiter of waiters) {
          void waiter.acquire(key, { ...ttl, waitMs: 20_000 }).then((l) => granted.push(l));
        }
        await waitersReach(holder, key, waiters.length);
        // Queued is not yet watching: give each waiter a moment to settle into its wait, so that
        // the release below is seen as a wake-up rather than found by a waiter's first look.
        await sleep(200);
        const before = wakeups();
        await lock.release();
        await eventually('one waiter granted', async () => granted.length === 1);
        await sleep(50);
        assert.equal(granted.length, 1, 'only one waiter is granted');
        // At most one (a waiter that looked again on its own, by a bounded timer on a slow
        // machine, may have found the name free without being woken): a herd wakes many.
        assert.ok(wakeups() - before <= 1, `at most one waiter was woken, not ${wakeups() - before}`);
        assert.equal((await holder.inspect(key))?.waiters, waiters.length - 1);
        for (let i = 1; i < waiters.length; i++) {
          await (granted[i - 1] as Lock).release();
          await eventually(`waiter ${i + 1} granted`, async () => granted.length === i + 1);
        }
        assert.ok(wakeups() - before <= waiters.length, 'at most one wake-up per release');
        // … and releases do wake waiters: a grant found only by looking again is polling.
        assert.ok(wakeups() - before >= waiters.length / 2, 'most releases woke the next waiter');
        await (granted.at(-1) as Lock).release();
      });
    }
  });
}
