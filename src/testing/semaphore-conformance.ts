import assert from 'node:assert/strict';
import type { LockLostError } from '../errors.js';
import type { Permit, Semaphore } from '../semaphore/types.js';
import type { LockProvider } from '../types.js';
import { assertCutOffWaitsEnd, eventually, rejectsWith, releaseStale, sleep, uniqueKey } from './helpers.js';
import { PermitChecker } from './permit-checker.js';
import { describeSemaphoreLockDelay } from './recipe-lock-delay-conformance.js';
import type { SemaphoreConformanceTarget, TestApi } from './target.js';

/** How long one test may wait for a grant before it counts as a failure rather than a hang. */
const WAIT = { waitMs: 20_000 };

/**
 * Waits until inspect() reports `count` waiters: a set-up step, not a speed check, so its bound is
 * as generous as a grant's: enqueueing a hundred waiters on a loaded machine takes seconds.
 */
function waitersReach(sem: Semaphore, count: number): Promise<void> {
  return eventually(
    `${count} waiters on ${sem.name}`,
    async () => (await sem.inspect()).waiters === count,
    WAIT.waitMs,
  );
}

/**
 * Registers the semaphore tests (docs/semaphores.md) for one backend. A provider without `semaphore()` (a
 * custom one) gets no tests: semaphores are optional in the LockProvider interface.
 */
export function describeSemaphoreConformance(target: SemaphoreConformanceTarget, t: TestApi): void {
  const opened: LockProvider[] = [];
  const open = async (): Promise<LockProvider> => {
    const provider = await target.createProvider();
    opened.push(provider);
    return provider;
  };
  const sem = async (name: string, limit: number, provider?: LockProvider): Promise<Semaphore> => {
    const p = provider ?? (await open());
    assert.ok(p.semaphore, `${p.backend} has no semaphore()`);
    return p.semaphore(name, { limit });
  };
  const ttl = { ttlMs: target.ttlMs };

  t.describe(`semaphore conformance: ${target.name}`, () => {
    t.afterEach?.(async () => {
      await Promise.allSettled(opened.splice(0).map((p) => p.close()));
    });

    t.it('refuses a bad name, limit or permit count and says which', async () => {
      const p = await open();
      assert.ok(p.semaphore);
      const make = p.semaphore.bind(p);
      for (const limit of [0, -1, 1.5, 10_001, Number.NaN, '2']) {
        const error = await rejectsWith(
          (async () => make(uniqueKey('limit'), { limit: limit as number }))(),
          'INVALID_ARGUMENT',
        );
        assert.equal((error as Error & { argument?: string }).argument, 'limit', error.message);
      }
      await rejectsWith((async () => make('a/../b', { limit: 1 }))(), 'INVALID_ARGUMENT');
      const s = make(uniqueKey('permits'), { limit: 3 });
      for (const permits of [0, 4, 1.5, '1']) {
        const error = await rejectsWith(s.acquire({ permits: permits as number }), 'INVALID_ARGUMENT');
        assert.equal((error as Error & { argument?: string }).argument, 'permits', error.message);
      }
      await rejectsWith(s.acquire({ ttl: 5 } as never), 'INVALID_ARGUMENT');
      assert.deepEqual((await s.inspect()).holders, [], 'refused requests leave nothing behind');
    });

    t.it('grants up to the limit, then tryAcquire gives null; inspect shows the holders', async () => {
      const [a, b] = [await open(), await open()];
      const name = uniqueKey('limit');
      const sa = await sem(name, 2, a);
      const sb = await sem(name, 2, b);
      const first = await sa.acquire({ ...ttl, owner: 'worker-1' });
      const second = await sb.acquire({ ...ttl, owner: 'worker-2' });
      assert.equal(typeof first.fencingToken, 'bigint');
      assert.ok(second.fencingToken > first.fencingToken, 'tokens rise per name');
      assert.ok(first.held && second.held && !first.signal.aborted);
      assert.equal(first.key, name);
      assert.equal(first.permits, 1);
      assert.notEqual(first.ownerToken, second.ownerToken);
      assert.equal(await sa.tryAcquire(ttl), null, 'no third permit');
      const info = await sb.inspect();
      assert.equal(info.name, name);
      assert.equal(info.limit, 2);
      assert.equal(info.waiters, 0);
      assert.deepEqual(
        [...info.holders]
          .sort((x, y) => (x.fencingToken < y.fencingToken ? -1 : 1))
          .map((h) => [h.owner, h.fencingToken, h.permits]),
        [
          ['worker-1', first.fencingToken, 1],
          ['worker-2', second.fencingToken, 1],
        ],
      );
      await first.release();
      const third = await sb.tryAcquire(ttl);
      assert.ok(third, 'a released permit is free again');
      assert.ok(third.fencingToken > second.fencingToken);
      await Promise.all([second.release(), third.release()]);
      assert.deepEqual((await sa.inspect()).holders, []);
    });

    t.it('never more than limit un-aborted permits, with many contenders; tokens rise', async () => {
      const limit = 3;
      const clients = await Promise.all(Array.from({ length: 4 }, () => open()));
      const name = uniqueKey('safety');
      const checker = new PermitChecker(limit);
      const errors: unknown[] = [];
      const worker = async (s: Semaphore, seed: number): Promise<void> => {
        for (let round = 0; round < 6; round++) {
          const permits = 1 + ((seed + round) % 2);
          const floor = checker.requesting();
          const permit = await s.acquire({ ...ttl, ...WAIT, permits });
          checker.granted(permit, floor);
          await sleep((seed * 7 + round * 3) % 11);
          checker.ending(permit);
          await permit.release();
        }
      };
      const runs: Promise<void>[] = [];
      for (const [c, client] of clients.entries()) {
        const s = await sem(name, limit, client);
        for (let w = 0; w < 4; w++)
          runs.push(worker(s, c * 4 + w).catch((e: unknown) => void errors.push(e)));
      }
      await Promise.all(runs);
      assert.deepEqual(errors, [], 'every worker finished');
      assert.deepEqual(checker.violations, []);
      assert.equal(checker.grants, 4 * 4 * 6);
      assert.ok(checker.peak >= 2, `contention happened (peak ${checker.peak})`);
    });

    t.it('permits > 1 are granted all or none', async () => {
      const [a, b] = [await open(), await open()];
      const name = uniqueKey('all-or-none');
      const sa = await sem(name, 3, a);
      const sb = await sem(name, 3, b);
      const one = await sa.acquire(ttl);
      const two = await sa.acquire(ttl);
      assert.equal(await sb.tryAcquire({ ...ttl, permits: 2 }), null, 'one free permit is not two');
      assert.equal((await sb.inspect()).holders.length, 2, 'no partial grant left behind');
      const waiting = sb.acquire({ ...ttl, ...WAIT, permits: 2 });
      await waitersReach(sa, 1);
      assert.equal((await sa.inspect()).holders.length, 2, 'the waiter took nothing yet');
      await one.release();
      const pair = await waiting;
      assert.equal(pair.permits, 2);
      const info = await sa.inspect();
      assert.deepEqual(info.holders.map((h) => h.permits).sort(), [1, 2]);
      assert.equal(await sa.tryAcquire(ttl), null, 'all three are taken');
      await Promise.all([two.release(), pair.release()]);
    });

    if (target.limitMismatch) {
      t.it('a name used with another limit: SemaphoreLimitMismatchError, never an over-grant', async () => {
        const [a, b] = [await open(), await open()];
        const name = uniqueKey('mismatch');
        const held = await (await sem(name, 1, a)).acquire(ttl);
        const other = await sem(name, 2, b);
        const error = await rejectsWith(other.tryAcquire(ttl), 'SEMAPHORE_LIMIT_MISMATCH');
        assert.equal(error.name, 'SemaphoreLimitMismatchError');
        await rejectsWith(other.acquire({ ...ttl, waitMs: 200 }), 'SEMAPHORE_LIMIT_MISMATCH');
        assert.equal((await (await sem(name, 1, b)).inspect()).holders.length, 1);
        await held.release();
      });
    }

    if (target.fifo) {
      t.it('FIFO: waiters are granted in request order', async () => {
        const clients = await Promise.all(Array.from({ length: 5 }, () => open()));
        const [holder, ...waiters] = clients as [LockProvider, ...LockProvider[]];
        const name = uniqueKey('fifo');
        const sh = await sem(name, 2, holder);
        const held = [await sh.acquire(ttl), await sh.acquire(ttl)];
        const order: number[] = [];
        const granted: Permit[] = [];
        const done: Promise<void>[] = [];
        for (const [index, waiter] of waiters.entries()) {
          const s = await sem(name, 2, waiter);
          done.push(
            s.acquire({ ...ttl, ...WAIT }).then((permit) => {
              order.push(index);
              granted[index] = permit;
            }),
          );
          await waitersReach(sh, index + 1);
        }
        // One permit frees at a time, so each grant has exactly one rightful waiter: the front.
        for (const permit of [...held, undefined, undefined]) {
          const before = order.length;
          await (permit ?? (granted[before - 2] as Permit)).release();
          await eventually(`grant ${before + 1}`, async () => order.length === before + 1);
        }
        await Promise.all(done);
        await Promise.all(granted.map((permit) => permit.release()));
        assert.deepEqual(order, [0, 1, 2, 3]);
      });
    }

    if (target.wakeups) {
      const wakeups = target.wakeups;
      t.it('no herd: at most one wake-up per released permit with 100 waiters', async () => {
        const clients = await Promise.all(Array.from({ length: 5 }, () => open()));
        const [holder, ...others] = clients as [LockProvider, ...LockProvider[]];
        const name = uniqueKey('herd');
        const limit = 2;
        const sh = await sem(name, limit, holder);
        const held = [await sh.acquire(ttl), await sh.acquire(ttl)];
        const semaphores = await Promise.all(others.map((p) => sem(name, limit, p)));
        let granted = 0;
        let released = 0;
        const errors: unknown[] = [];
        const done: Promise<void>[] = [];
        for (let i = 0; i < 100; i++) {
          const s = semaphores[i % semaphores.length] as Semaphore;
          done.push(
            s
              .acquire({ ...ttl, ...WAIT })
              .then(async (permit) => {
                granted += 1;
                await sleep(1);
                released += 1;
                await permit.release();
              })
              .catch((e: unknown) => void errors.push(e)),
          );
        }
        await waitersReach(sh, 100);
        await sleep(200); // queued is not yet watching: let each waiter settle into its wait
        const before = wakeups();
        for (const permit of held) {
          released += 1;
          await permit.release();
        }
        await Promise.all(done);
        assert.deepEqual(errors, []);
        assert.equal(granted, 100);
        const ratio = (wakeups() - before) / released;
        assert.ok(ratio <= 1.0, `${wakeups() - before} wake-ups for ${released} released permits`);
      });
    }

    t.it('cancelled waiters (waitMs, signal) leave nothing behind', async () => {
      const [a, b] = [await open(), await open()];
      const name = uniqueKey('cancel');
      const sa = await sem(name, 1, a);
      const sb = await sem(name, 1, b);
      const held = await sa.acquire(ttl);
      const controller = new AbortController();
      const aborted = [1, 2, 3].map(() => sb.acquire({ ...ttl, signal: controller.signal }));
      const abortedAll = Promise.all(aborted.map((w) => rejectsWith(w, 'AbortError')));
      const started = performance.now();
      const timedOut = await Promise.all(
        [1, 2].map(() => rejectsWith(sb.acquire({ ...ttl, waitMs: 150 }), 'LOCK_TIMEOUT')),
      );
      assert.equal(timedOut.length, 2);
      assert.ok(performance.now() - started >= 140, 'did not give up before waitMs');
      controller.abort(new Error('shutting down'));
      await abortedAll;
      await rejectsWith(sb.acquire({ signal: AbortSignal.abort() }), 'AbortError');
      await waitersReach(sa, 0);
      assert.ok(held.held, 'the holder is untouched');
      await held.release();
      await sleep(100); // a grant that raced a cancel would show up now
      const info = await sa.inspect();
      assert.deepEqual(info.holders, [], 'no cancelled waiter was granted');
      assert.equal(info.waiters, 0);
      const again = await sb.tryAcquire(ttl);
      assert.ok(again, 'the permit is free');
      await again.release();
    });

    t.it('release is idempotent and guarded; withPermit and await using release', async () => {
      const [a, b] = [await open(), await open()];
      const name = uniqueKey('release');
      const sa = await sem(name, 1, a);
      const sb = await sem(name, 1, b);
      const first = await sa.acquire(ttl);
      await first.release();
      assert.equal(first.held, false);
      assert.equal((first.signal.reason as LockLostError).reason, 'released');
      const second = await sb.acquire(ttl);
      await first.release();
      await first[Symbol.asyncDispose]();
      assert.ok(second.held);
      assert.equal(await sa.tryAcquire(ttl), null, 'the newer grant still counts');
      await second[Symbol.asyncDispose]();
      let seen: Permit | undefined;
      const value = await sa.withPermit(async (permit) => {
        seen = permit;
        assert.ok(permit.held);
        return 42;
      }, ttl);
      assert.equal(value, 42);
      assert.equal(seen?.held, false);
      await assert.rejects(
        sa.withPermit(async () => {
          throw new Error('work failed');
        }, ttl),
        /work failed/,
      );
      assert.deepEqual((await sa.inspect()).holders, [], 'released after the throw');
    });

    t.it('close() releases held permits, fails waiters and later calls', async () => {
      const [a, b] = [await open(), await open()];
      const name = uniqueKey('close');
      const sa = await sem(name, 1, a);
      const sb = await sem(name, 1, b);
      const held = await sa.acquire(ttl);
      const waiting = sa.acquire(ttl);
      await waitersReach(sb, 1);
      const refused = rejectsWith(waiting, 'PROVIDER_CLOSED');
      await a.close();
      await refused;
      assert.equal(held.held, false);
      // close() waited for the release: the permit is free now, not once a lease runs out.
      assert.deepEqual((await sb.inspect()).holders, [], 'close() released the permit before returning');
      const taken = await sb.tryAcquire(ttl);
      assert.ok(taken, 'close() released the permit on the backend');
      await rejectsWith(sa.acquire(ttl), 'PROVIDER_CLOSED');
      await taken.release();
    });

    const faults = target.faults;
    if (faults) {
      t.it('liveness: a crashed holder’s permits come back within its TTL / session', async () => {
        const [a, b] = [await open(), await open()];
        const name = uniqueKey('liveness');
        const sa = await sem(name, 2, a);
        const held = [await sa.acquire(ttl), await sa.acquire(ttl)];
        await faults.crash(a);
        const started = performance.now();
        const sb = await sem(name, 2, b);
        const next = await sb.acquire({ ...ttl, permits: 2, waitMs: target.holderDeathBoundMs });
        const waited = performance.now() - started;
        assert.ok(next.fencingToken > (held[1] as Permit).fencingToken);
        assert.ok(waited <= target.holderDeathBoundMs, `free after ${Math.round(waited)} ms`);
        await next.release();
      });

      const partition = faults.partition;
      if (partition) {
        t.it('early loss signal: a cut-off holder’s permit aborts before it is granted again', async () => {
          const [a, b] = [await open(), await open()];
          const name = uniqueKey('early-loss');
          const held = await (await sem(name, 1, a)).acquire(ttl);
          let abortedAt = Number.NaN;
          held.signal.addEventListener('abort', () => {
            abortedAt = performance.now();
          });
          const sb = await sem(name, 1, b);
          const waiting = sb.acquire({ ...ttl, waitMs: target.holderDeathBoundMs + 2_000 });
          await waitersReach(sb, 1);
          await partition(a, true);
          const next = await waiting;
          const grantedAt = performance.now();
          try {
            assert.ok(held.signal.aborted, 'the old holder was told before the new grant');
            assert.ok(
              abortedAt < grantedAt,
              `aborted ${Math.round(abortedAt - grantedAt)} ms after the grant`,
            );
            assert.equal((held.signal.reason as LockLostError).code, 'LOCK_LOST');
            assert.ok(next.fencingToken > held.fencingToken);
          } finally {
            await partition(a, false);
          }
          // The stale holder's release after healing must not remove the new grant.
          await releaseStale(held);
          assert.ok(next.held);
          assert.deepEqual(
            (await sb.inspect()).holders.map((h) => h.fencingToken),
            [next.fencingToken],
          );
          await next.release();
        });

        t.it('cut off: waitMs and abort are honoured, close() is bounded', async () => {
          const [a, b] = [await open(), await open()];
          const name = uniqueKey('cut-wait');
          const held = await (await sem(name, 1, a)).acquire(ttl);
          const sb = await sem(name, 1, b);
          await sb.inspect(); // b has reached the backend
          const mine = await (await sem(`${name}-b`, 1, b)).acquire(ttl);
          await partition(b, true);
          try {
            await assertCutOffWaitsEnd((options) => sb.acquire({ ...ttl, ...options }));
            if (target.callTimeoutMs !== undefined) {
              const started = performance.now();
              await b.close();
              const closing = performance.now() - started;
              assert.ok(
                closing < target.callTimeoutMs + 1_000 + 500,
                `close() of a cut-off provider took ${Math.round(closing)} ms`,
              );
              assert.equal(mine.held, false, 'close() aborted the permit it held');
            }
          } finally {
            await partition(b, false);
          }
          await held.release();
        });
      }
    }

    describeSemaphoreLockDelay(target, t, open);
  });
}
