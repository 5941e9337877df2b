import assert from 'node:assert/strict';
import { createElection } from '../election/lock-election.js';
import type { LockProvider } from '../types.js';
import { eventually, rejectsWith, releaseStale, uniqueKey, waitersReach } from './helpers.js';
import type { ConformanceTarget, TestApi } from './target.js';

type AdminProvider = LockProvider & Required<Pick<LockProvider, 'forceRelease'>>;

/** The delay the tests ask for: long enough to see, short enough to wait for. */
const DELAY_MS = 1_500;
/** Generous: a grant may come late under load, never early. */
const LATE_BOUND_MS = 30_000;

/**
 * Whether the provider keeps lock-delay: a provider that refuses it must do so with
 * NotImplementedError (asserted here), and its lock-delay tests then pass as skipped.
 */
async function keepsLockDelay(provider: LockProvider, expected: boolean | undefined): Promise<boolean> {
  try {
    const lock = await provider.tryAcquire(uniqueKey('delay-probe'), { lockDelayMs: 1 });
    await lock?.release();
    return true;
  } catch (error) {
    assert.equal((error as { code?: string }).code, 'NOT_IMPLEMENTED', String(error));
    assert.ok(!expected, `the target keeps lock-delay, yet it was refused: ${String(error)}`);
    return false;
  }
}

/**
 * Lock-delay (AcquireOptions.lockDelayMs): a grant that is lost keeps its name from everybody for
 * the delay after the loss; a clean release does not. Times are measured with the monotonic clock
 * and asserted only as lower bounds (a slow machine makes grants later, never earlier), counted
 * from before the call that causes the loss, since the backend starts the delay after receiving it.
 */
export function describeLockDelay(
  target: ConformanceTarget,
  t: TestApi,
  open: () => Promise<LockProvider>,
): void {
  const ttl = { ttlMs: target.ttlMs };
  /** Providers that keep lock-delay and have forceRelease, or undefined (the test is skipped). */
  const openKeeping = async (count: number): Promise<AdminProvider[] | undefined> => {
    const providers: AdminProvider[] = [];
    for (let i = 0; i < count; i++) providers.push((await open()) as AdminProvider);
    if (typeof providers[0]?.forceRelease !== 'function') return undefined;
    return (await keepsLockDelay(providers[0] as LockProvider, target.lockDelay)) ? providers : undefined;
  };

  t.describe('lock-delay', () => {
    t.it('refuses lockDelayMs outside 0..60000 with InvalidArgumentError', async () => {
      const p = await open();
      const key = uniqueKey('delay-range');
      for (const lockDelayMs of [-1, 60_001, Number.NaN, Number.POSITIVE_INFINITY, '100']) {
        const error = await rejectsWith(p.acquire(key, { lockDelayMs } as never), 'INVALID_ARGUMENT');
        assert.equal((error as Error & { argument?: string }).argument, 'lockDelayMs');
        await rejectsWith(p.tryAcquire(key, { lockDelayMs } as never), 'INVALID_ARGUMENT');
      }
      // 0 is the default and changes nothing, on every provider.
      const lock = await p.acquire(key, { ...ttl, lockDelayMs: 0 });
      await lock.release();
      assert.equal(await p.inspect(key), null);
    });

    t.it('a force-released holder: the next grant comes lockDelayMs after the force-release', async () => {
      const providers = await openKeeping(3);
      if (!providers) return;
      const [a, b, operator] = providers as [AdminProvider, AdminProvider, AdminProvider];
      const key = uniqueKey('delay-force');
      const holder = await a.acquire(key, { ...ttl, lockDelayMs: DELAY_MS });
      await b.inspect(key); // b has reached the backend before it waits
      const waiting = b.acquire(key, { ...ttl, waitMs: LATE_BOUND_MS });
      await waitersReach(operator, key, 1);
      const sentAt = performance.now();
      assert.ok(await operator.forceRelease(key, { reason: 'lock-delay test' }));
      const info = await operator.inspect(key);
      assert.ok(info?.delayedUntil instanceof Date, `inspect shows the delay: ${JSON.stringify(info)}`);
      assert.equal(info.holder, null, 'nobody holds the key during the delay');
      const next = await waiting;
      const waitedMs = performance.now() - sentAt;
      assert.ok(waitedMs >= DELAY_MS, `granted ${waitedMs.toFixed(0)} ms after the force-release`);
      assert.ok(next.fencingToken > holder.fencingToken);
      assert.equal((await operator.inspect(key))?.delayedUntil, undefined, 'the delay is over');
      await releaseStale(holder); // revoked: it may say so (NOT_HOLDER, LOCK_LOST), nothing else
      await next.release();
    });

    t.it(
      'tryAcquire answers null during the delay, and a shorter waitMs ends with LockTimeoutError',
      async () => {
        const providers = await openKeeping(3);
        if (!providers) return;
        const [a, b, operator] = providers as [AdminProvider, AdminProvider, AdminProvider];
        const key = uniqueKey('delay-try');
        // Long enough that the calls below run inside it on any machine.
        const lockDelayMs = 4_000;
        await a.acquire(key, { ...ttl, lockDelayMs });
        const sentAt = performance.now();
        assert.ok(await operator.forceRelease(key, { reason: 'lock-delay test' }));
        assert.equal(await b.tryAcquire(key, ttl), null, 'tryAcquire is refused during the delay');
        await rejectsWith(b.acquire(key, { ...ttl, waitMs: 200 }), 'LOCK_TIMEOUT');
        assert.ok(performance.now() - sentAt < lockDelayMs, 'the calls above ran inside the delay');
        assert.ok((await operator.inspect(key))?.delayedUntil instanceof Date);
        // After the delay the name is free again, with nobody left queued by the refused calls.
        const later = await b.acquire(key, { ...ttl, waitMs: LATE_BOUND_MS });
        assert.ok(performance.now() - sentAt >= lockDelayMs);
        assert.equal((await operator.inspect(key))?.waiters, 0);
        await later.release();
      },
    );

    t.it('a clean release starts no delay: the next request is granted at once', async () => {
      const providers = await openKeeping(2);
      if (!providers) return;
      const [a, b] = providers as [AdminProvider, AdminProvider];
      const key = uniqueKey('delay-release');
      const first = await a.acquire(key, { ...ttl, lockDelayMs: DELAY_MS });
      await first.release();
      assert.equal(await b.inspect(key), null, 'no delayedUntil after a clean release');
      const second = await b.tryAcquire(key, { ...ttl, lockDelayMs: DELAY_MS });
      assert.ok(second?.held, 'tryAcquire right after the release is granted');
      // A waiter (of another client) is handed the key by the release, also without delay.
      const waiting = a.acquire(key, { ...ttl, waitMs: LATE_BOUND_MS });
      waiting.catch(() => undefined); // awaited below; a failed wait fails the test there
      await waitersReach(b, key, 1);
      await second.release();
      const third = await waiting;
      assert.equal((await a.inspect(key))?.delayedUntil, undefined);
      await third.release();
    });

    if (target.faults) {
      const faults = target.faults;
      t.it('a holder whose lease or session is lost: the name is delayed after the loss', async () => {
        const providers = await openKeeping(3);
        if (!providers) return;
        const [a, b, observer] = providers as [AdminProvider, AdminProvider, AdminProvider];
        const key = uniqueKey('delay-expired');
        const holder = await a.acquire(key, { ...ttl, lockDelayMs: DELAY_MS });
        await b.inspect(key);
        const waiting = b.acquire(key, { ...ttl, waitMs: LATE_BOUND_MS + target.holderDeathBoundMs });
        await waitersReach(observer, key, 1);
        const crashedAt = performance.now();
        await faults.crash(a);
        // The loss comes after the crash, the grant at least the delay after the loss.
        let sawDelay = false;
        let granted = false;
        void waiting.then(() => {
          granted = true;
        });
        await eventually(
          'the grant after the delay',
          async () => {
            const info = await observer.inspect(key);
            if (!granted && info?.delayedUntil instanceof Date && info.holder === null) sawDelay = true;
            return granted;
          },
          LATE_BOUND_MS + target.holderDeathBoundMs,
        );
        const next = await waiting;
        assert.ok(performance.now() - crashedAt >= DELAY_MS, 'granted no sooner than the delay');
        assert.ok(sawDelay, 'inspect showed delayedUntil and no holder during the delay');
        assert.ok(next.fencingToken > holder.fencingToken);
        await next.release();
      });
    }

    t.it('an election campaign passes lockDelayMs on to its lock', async () => {
      const providers = await openKeeping(3);
      if (!providers) return;
      const [a, b, operator] = providers as [AdminProvider, AdminProvider, AdminProvider];
      const name = uniqueKey('delay-election');
      const first = await createElection(a, name, ttl).campaign('a', { lockDelayMs: DELAY_MS });
      const sentAt = performance.now();
      assert.ok(await operator.forceRelease(name, { reason: 'lock-delay test' }));
      const second = await createElection(b, name, ttl).campaign('b', { waitMs: LATE_BOUND_MS });
      assert.ok(performance.now() - sentAt >= DELAY_MS, 'the next term waited for the delay');
      assert.ok(second.term > first.term);
      await second.resign();
      await releaseStale({ release: () => first.resign() }); // revoked, as above
    });
  });
}
