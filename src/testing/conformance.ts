import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { LockLostError } from '../errors.js';
import type { Lock, LockProvider } from '../types.js';
import { MAX_KEY_BYTES } from '../validate.js';
import { describeAdministration } from './admin-conformance.js';
import {
  ExclusionMonitor,
  eventually,
  rejectsWith,
  releaseStale,
  sleep,
  uniqueKey,
  waitersReach,
} from './helpers.js';
import { describeLockDelay } from './lock-delay-conformance.js';
import type { ConformanceTarget, TestApi } from './target.js';

const INVALID_KEYS: Array<[string, unknown]> = [
  ['empty', ''],
  ['too long', 'k'.repeat(MAX_KEY_BYTES + 1)],
  ['NUL byte', 'a\u0000b'],
  ['newline', 'a\nb'],
  ['parent segment', 'a/../b'],
  ['leading parent', '../etc'],
  ['dot segment', 'a/./b'],
  ['leading slash', '/a'],
  ['trailing slash', 'a/'],
  ['double slash', 'a//b'],
  ['surrounding space', ' a'],
  ['not a string', 42],
];

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

    t.describe('argument validation', () => {
      for (const [label, key] of INVALID_KEYS) {
        t.it(`refuses a key that is ${label}`, async () => {
          const p = await open();
          await rejectsWith(p.acquire(key as string), 'INVALID_ARGUMENT');
          await rejectsWith(p.tryAcquire(key as string), 'INVALID_ARGUMENT');
          await rejectsWith(p.inspect(key as string), 'INVALID_ARGUMENT');
        });
      }
      t.it('refuses bad options and says which one', async () => {
        const p = await open();
        const key = uniqueKey('options');
        const bad: Array<[string, object]> = [
          ['ttlMs', { ttlMs: -1 }],
          ['ttlMs', { ttlMs: Number.NaN }],
          ['waitMs', { waitMs: -5 }],
          ['waitMs', { waitMs: '10' }],
          ['signal', { signal: {} }],
          ['owner', { owner: 7 }],
          ['options', { ttl: 1000 }],
        ];
        for (const [argument, opts] of bad) {
          const error = await rejectsWith(p.acquire(key, opts as never), 'INVALID_ARGUMENT');
          assert.equal((error as Error & { argument?: string }).argument, argument, error.message);
        }
        assert.equal(await p.inspect(key), null, 'a refused acquire must leave nothing behind');
      });
      t.it('accepts Unicode keys and owner text', async () => {
        const p = await open();
        const key = `${uniqueKey('unicode')}/zählwerk-☃`;
        const lock = await p.acquire(key, { ...ttl, owner: 'host-ä/pid 1' });
        assert.equal((await p.inspect(key))?.holder?.owner, 'host-ä/pid 1');
        await lock.release();
      });
    });

    t.describe('grants', () => {
      t.it('acquire grants a held lock with a bigint token, and inspect shows its holder', async () => {
        const p = await open();
        const key = uniqueKey('grant');
        const lock = await p.acquire(key, { ...ttl, owner: 'worker-1' });
        assert.equal(lock.key, key);
        assert.equal(typeof lock.fencingToken, 'bigint');
        assert.ok(lock.fencingToken > 0n);
        assert.equal(typeof lock.ownerToken, 'string');
        assert.ok(lock.held);
        assert.equal(lock.signal.aborted, false);
        const info = await p.inspect(key);
        assert.ok(info?.holder, 'inspect shows a holder');
        assert.equal(info.holder.fencingToken, lock.fencingToken);
        assert.equal(info.holder.owner, 'worker-1');
        assert.ok(info.holder.since instanceof Date);
        assert.equal(info.waiters, 0);
        await lock.release();
        assert.equal(lock.held, false);
        assert.ok(lock.signal.reason instanceof LockLostError);
        assert.equal((lock.signal.reason as LockLostError).reason, 'released');
        assert.equal(await p.inspect(key), null, 'released and nobody waiting: nothing left');
      });

      t.it('tryAcquire never waits: null while another client holds the key', async () => {
        const [a, b] = [await open(), await open()];
        const key = uniqueKey('try');
        const lock = await a.acquire(key, ttl);
        assert.equal(await b.tryAcquire(key, ttl), null);
        await rejectsWith(b.acquire(key, { ...ttl, waitMs: 0 }), 'LOCK_TIMEOUT');
        assert.equal((await a.inspect(key))?.waiters, 0, 'a failed try leaves no waiter');
        await lock.release();
        const second = await b.tryAcquire(key, ttl);
        assert.ok(second?.held);
        await second.release();
      });

      t.it('tryAcquire and waitMs 0 never wait, also when this same provider holds the key', async () => {
        const p = await open();

        const key = uniqueKey('try-own');

        const lock = await p.acquire(key, ttl);

        const outcome = (promise: Promise<unknown>) =>
          Promise.race([
            promise.then(
              (v) => (v === null ? 'null' : 'granted'),
              (e: { code?: string }) => e.code,
            ),
            sleep(3_000).then(() => 'pending'),
          ]);

        assert.equal(await outcome(p.tryAcquire(key, ttl)), 'null');

        assert.equal(await outcome(p.acquire(key, { ...ttl, waitMs: 0 })), 'LOCK_TIMEOUT');

        await lock.release();
      });

      t.it('concurrent acquires of one key inside one provider exclude each other', async () => {
        const p = await open();
        const key = uniqueKey('same-provider');
        const monitor = new ExclusionMonitor();
        await Promise.all(
          Array.from({ length: 4 }, () =>
            p.withLock(
              key,
              async (lock) => {
                monitor.enter(lock);
                await sleep(5);
                monitor.exit(lock);
              },
              ttl,
            ),
          ),
        );
        assert.equal(monitor.entries, 4);
      });

      t.it('tokens rise strictly across successive holders and clients', async () => {
        const clients = [await open(), await open(), await open()];
        const key = uniqueKey('tokens');
        let previous = 0n;
        for (let round = 0; round < 9; round++) {
          const client = clients[round % clients.length] as LockProvider;
          const lock = await client.acquire(key, ttl);
          assert.ok(lock.fencingToken > previous, `round ${round}: ${lock.fencingToken} after ${previous}`);
          previous = lock.fencingToken;
          await lock.release();
        }
      });

      t.it('safety: contending clients never overlap and see rising tokens', async () => {
        const clients = await Promise.all(Array.from({ length: 4 }, () => open()));
        const key = uniqueKey('safety');
        const monitor = new ExclusionMonitor();
        await Promise.all(
          clients.map(async (client) => {
            for (let i = 0; i < 5; i++) {
              await client.withLock(
                key,
                async (lock) => {
                  monitor.enter(lock);
                  assert.ok(lock.held);
                  await sleep(Math.random() * 4);
                  monitor.exit(lock);
                },
                { ...ttl, waitMs: 30_000 },
              );
            }
          }),
        );
        assert.equal(monitor.entries, 20);
      });

      t.it('names that nest do not interfere', async () => {
        const [a, b] = [await open(), await open()];
        const parent = uniqueKey('nest');
        const child = `${parent}/child`;
        const parentLock = await a.acquire(parent, ttl);
        const childLock = await b.tryAcquire(child, ttl);
        assert.ok(childLock, 'a/b is free while a is held');
        const waiting = a.acquire(child, { ...ttl, waitMs: 10_000 });
        await waitersReach(b, child, 1);
        assert.equal((await a.inspect(parent))?.waiters, 0, 'waiters on a/b are not waiters on a');
        assert.equal((await a.inspect(parent))?.holder?.fencingToken, parentLock.fencingToken);
        await parentLock.release();
        assert.ok(childLock.held, 'releasing a leaves a/b held');
        assert.equal((await b.inspect(child))?.holder?.fencingToken, childLock.fencingToken);
        await childLock.release();
        const next = await waiting;
        assert.equal(next.key, child);
        await next.release();
      });
    });

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
        const controller = new AbortController();
        const aborted = b.acquire(key, { ...ttl, signal: controller.signal });
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

    t.describe('release', () => {
      t.it('release is idempotent and a repeated release never removes a newer grant', async () => {
        const [a, b] = [await open(), await open()];
        const key = uniqueKey('guarded');
        const first = await a.acquire(key, ttl);
        await first.release();
        const second = await b.acquire(key, ttl);
        await first.release();
        await first[Symbol.asyncDispose]();
        assert.ok(second.held);
        assert.equal((await b.inspect(key))?.holder?.fencingToken, second.fencingToken);
        assert.equal(await a.tryAcquire(key, ttl), null, 'the newer grant still excludes others');
        await second.release();
      });

      t.it('withLock passes the lock, returns fn’s value and releases even when fn throws', async () => {
        const p = await open();
        const key = uniqueKey('with-lock');
        let seen: Lock | undefined;
        const value = await p.withLock(
          key,
          async (lock) => {
            seen = lock;
            assert.ok(lock.held);
            return 42;
          },
          ttl,
        );
        assert.equal(value, 42);
        assert.equal(seen?.held, false);
        await assert.rejects(
          p.withLock(
            key,
            async () => {
              throw new Error('work failed');
            },
            ttl,
          ),
          /work failed/,
        );
        assert.equal(await p.inspect(key), null, 'released after the throw');
      });

      t.it('Symbol.asyncDispose releases (await using)', async () => {
        const p = await open();
        const key = uniqueKey('dispose');
        const lock = await p.acquire(key, ttl);
        await lock[Symbol.asyncDispose]();
        assert.equal(lock.held, false);
        assert.equal(await p.inspect(key), null);
      });

      t.it('close() releases what it holds, fails its waiters and later calls', async () => {
        const [a, b] = [await open(), await open()];
        const key = uniqueKey('close');
        const lock = await a.acquire(key, ttl);
        const other = await b.acquire(`${key}-other`, ttl);
        const waiting = a.acquire(`${key}-other`, ttl);
        await waitersReach(b, `${key}-other`, 1);
        const refused = rejectsWith(waiting, 'PROVIDER_CLOSED'); // handled before close() rejects it
        await a.close();
        await refused;
        assert.equal(lock.held, false);
        assert.equal((lock.signal.reason as LockLostError).reason, 'released');
        const taken = await b.tryAcquire(key, ttl);
        assert.ok(taken, 'close() released the lock on the backend');
        await rejectsWith(a.acquire(key, ttl), 'PROVIDER_CLOSED');
        assert.equal((await b.inspect(`${key}-other`))?.waiters, 0);
        await taken.release();
        await other.release();
      });
    });

    describeAdministration(target, t, open);
    describeLockDelay(target, t, open);

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
        t.it(
          'early loss signal: a cut-off holder’s signal aborts before anyone else is granted',
          async () => {
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
          },
        );

        t.it('cut off: waitMs is honoured and the wait ends with a timeout or unavailable', async () => {
          const [a, b] = [await open(), await open()];
          const key = uniqueKey('cut-wait');
          const lock = await a.acquire(key, ttl);
          await b.inspect(key); // b has reached the backend
          await partition(b, true);
          try {
            const started = performance.now();
            const error = await rejectsWith(b.acquire(key, { ...ttl, waitMs: 300 }));
            const waited = performance.now() - started;
            assert.ok(
              ['LOCK_TIMEOUT', 'BACKEND_UNAVAILABLE'].includes((error as { code?: string }).code ?? ''),
              `ended with ${error.message}`,
            );
            assert.ok(waited < 300 + 1_500, `waitMs 300 ended only after ${Math.round(waited)} ms`);
            const controller = new AbortController();
            const abortedAt = performance.now();
            const aborted = b.acquire(key, { ...ttl, signal: controller.signal });
            setTimeout(() => controller.abort(new Error('stop')), 100);
            await rejectsWith(aborted, 'AbortError');
            const took = performance.now() - abortedAt;
            assert.ok(
              took < 100 + 1_500,
              `an abort at 100 ms ended the wait only after ${Math.round(took)} ms`,
            );
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
  });
}

/** The provider's call deadline (BaseLockProvider's callTimeoutMs), 5 s where it says none. */
function callTimeoutOf(provider: LockProvider): number {
  const ms = (provider as unknown as { callTimeoutMs?: unknown }).callTimeoutMs;
  return typeof ms === 'number' ? ms : 5_000;
}

/**
 * Records the cancel signal of every request a provider built on BaseLockProvider makes (its
 * protected `request`), to check that waits take their listeners back. Other providers: undefined.
 */
function recordCancelSignals(provider: LockProvider): Set<AbortSignal> | undefined {
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
