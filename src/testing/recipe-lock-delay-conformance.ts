import assert from 'node:assert/strict';
import type { ReadWriteLock } from '../read-write/types.js';
import type { Semaphore } from '../semaphore/types.js';
import type { LockProvider } from '../types.js';
import { eventually, rejectsWith, uniqueKey } from './helpers.js';
import type { SemaphoreConformanceTarget, TestApi } from './target.js';

/** The delay the waiting tests ask for: long enough to see, short enough to wait for. */
const DELAY_MS = 1_500;
/** The delay of the tests that act inside it: long enough for a few calls on a loaded machine. */
const LONG_DELAY_MS = 6_000;
/** Generous: a grant may come late under load, never early. */
const LATE_BOUND_MS = 30_000;

/**
 * Whether the recipe keeps lock-delay: one that refuses must do so with NotImplementedError
 * (asserted here), and its lock-delay tests then pass as skipped.
 */
async function keepsLockDelay(
  tryGrant: () => Promise<{ release(): Promise<void> } | null>,
  expected: boolean | undefined,
): Promise<boolean> {
  try {
    await (await tryGrant())?.release();
    return true;
  } catch (error) {
    assert.equal((error as { code?: string }).code, 'NOT_IMPLEMENTED', String(error));
    assert.ok(!expected, `the target keeps lock-delay, yet it was refused: ${String(error)}`);
    return false;
  }
}

/** Resolves when `acquiring` is granted; `granted()` says whether it has been, without awaiting it. */
function pending<T>(acquiring: Promise<T>): { promise: Promise<T>; granted: () => boolean } {
  let done = false;
  const promise = acquiring.then((grant) => {
    done = true;
    return grant;
  });
  promise.catch(() => undefined); // awaited by the test, which fails there
  return { promise, granted: () => done };
}

/**
 * Waits until `grant` of a crashed client is granted, asserting it came no sooner than `delayMs`
 * after the crash, and that inspect showed the delay (and the lost grant gone) before it did.
 * The crash comes before the loss, the loss before the delay: the bound is a lower one only.
 */
async function grantedAfterDelay<T>(
  waiting: { promise: Promise<T>; granted: () => boolean },
  crashedAt: number,
  delayMs: number,
  delayShown: () => Promise<boolean>,
  boundMs: number,
): Promise<T> {
  let sawDelay = false;
  await eventually(
    'the grant after the delay',
    async () => {
      if (!waiting.granted() && (await delayShown()) && !waiting.granted()) sawDelay = true;
      return waiting.granted();
    },
    boundMs,
  );
  const grant = await waiting.promise;
  assert.ok(performance.now() - crashedAt >= delayMs, 'granted no sooner than the delay');
  assert.ok(sawDelay, 'inspect showed the delay while the waiter waited');
  return grant;
}

/**
 * Lock-delay on semaphores: a lost grant's permits stay taken for the delay after the loss; the
 * other permits are granted as usual; a release gives the permits back at once. Grants are lost
 * by a crash (the target's fault), since semaphores have no force-release.
 */
export function describeSemaphoreLockDelay(
  target: SemaphoreConformanceTarget,
  t: TestApi,
  open: () => Promise<LockProvider>,
): void {
  const ttl = { ttlMs: target.ttlMs };
  const bound = LATE_BOUND_MS + target.holderDeathBoundMs;
  /** One semaphore seen from `count` providers, as from as many processes. */
  const sems = async (label: string, limit: number, count: number) => {
    const name = uniqueKey(label);
    const providers: LockProvider[] = [];
    const handles: Semaphore[] = [];
    for (let i = 0; i < count; i += 1) {
      const provider = await open();
      assert.ok(provider.semaphore, `${provider.backend} has no semaphore()`);
      providers.push(provider);
      handles.push(provider.semaphore(name, { limit }));
    }
    return { providers, handles };
  };
  /** Three views of one semaphore (the first one's provider to crash), or undefined to skip. */
  const three = async (label: string, limit: number) => {
    const { providers, handles } = await sems(label, limit, 3);
    const [a, b, c] = handles as [Semaphore, Semaphore, Semaphore];
    const keeps = await keepsLockDelay(() => b.tryAcquire({ ...ttl, lockDelayMs: 1 }), target.lockDelay);
    return keeps ? { a, b, observer: c, crashable: providers[0] as LockProvider } : undefined;
  };

  t.describe('lock-delay', () => {
    t.it('refuses lockDelayMs outside 0..60000 with InvalidArgumentError', async () => {
      const [s] = (await sems('delay-range', 2, 1)).handles as [Semaphore];
      for (const lockDelayMs of [-1, 60_001, Number.NaN, Number.POSITIVE_INFINITY, '100']) {
        const error = await rejectsWith(s.acquire({ lockDelayMs } as never), 'INVALID_ARGUMENT');
        assert.equal((error as Error & { argument?: string }).argument, 'lockDelayMs');
        await rejectsWith(s.tryAcquire({ lockDelayMs } as never), 'INVALID_ARGUMENT');
      }
      const permit = await s.acquire({ ...ttl, lockDelayMs: 0 });
      await permit.release();
      assert.deepEqual((await s.inspect()).delayed, []);
    });

    t.it('a clean release starts no delay: the permits are granted again at once', async () => {
      const views = await three('delay-release', 2);
      if (!views) return;
      const { a, b } = views;
      const first = await a.acquire({ ...ttl, permits: 2, lockDelayMs: DELAY_MS });
      await first.release();
      assert.deepEqual((await b.inspect()).delayed, [], 'no delay after a release');
      const second = await b.tryAcquire({ ...ttl, permits: 2 });
      assert.ok(second?.held, 'all the permits are free right after the release');
      await second.release();
    });

    const crash = target.faults?.crash;
    if (!crash) return;

    t.it('a lost grant keeps its permits for lockDelayMs after the loss', async () => {
      const views = await three('delay-lost', 1);
      if (!views) return;
      const { a, b, observer } = views;
      const lost = await a.acquire({ ...ttl, lockDelayMs: DELAY_MS });
      const waiting = pending(b.acquire({ ...ttl, waitMs: bound }));
      await eventually('one waiter', async () => (await observer.inspect()).waiters === 1, bound);
      const crashedAt = performance.now();
      await crash(views.crashable);
      const next = await grantedAfterDelay(
        waiting,
        crashedAt,
        DELAY_MS,
        async () => {
          const info = await observer.inspect();
          return info.holders.length === 0 && info.delayed.some((d) => d.permits === 1);
        },
        bound,
      );
      assert.ok(next.fencingToken > lost.fencingToken);
      assert.deepEqual((await observer.inspect()).delayed, [], 'the delay is over');
      await next.release();
    });

    t.it('during the delay only the other permits are granted; tryAcquire says null', async () => {
      const views = await three('delay-other', 3);
      if (!views) return;
      const { a, b, observer } = views;
      const lost = await a.acquire({ ...ttl, lockDelayMs: LONG_DELAY_MS });
      await crash(views.crashable);
      const delayedNow = async () => (await observer.inspect()).delayed.some((d) => d.permits === 1);
      await eventually('the loss and its delay', delayedNow, bound);
      assert.equal(await b.tryAcquire({ ...ttl, permits: 3 }), null, 'the delayed permit is not free');
      const two = await b.tryAcquire({ ...ttl, permits: 2 });
      assert.ok(two?.held, 'the two other permits are');
      assert.ok(await delayedNow(), 'the calls above ran inside the delay');
      await two.release();
      const all = await b.acquire({ ...ttl, permits: 3, waitMs: bound });
      assert.ok(all.fencingToken > lost.fencingToken);
      assert.deepEqual((await observer.inspect()).delayed, []);
      await all.release();
    });
  });
}

/**
 * Lock-delay on read-write locks: a lost write keeps out readers and writers for the delay after
 * the loss, a lost read keeps out writers only; a release starts no delay. Grants are lost by a
 * crash (the target's fault).
 */
export function describeReadWriteLockDelay(
  target: Pick<SemaphoreConformanceTarget, 'ttlMs' | 'holderDeathBoundMs' | 'faults' | 'lockDelay'>,
  t: TestApi,
  open: () => Promise<LockProvider>,
): void {
  const ttl = { ttlMs: target.ttlMs };
  const bound = LATE_BOUND_MS + target.holderDeathBoundMs;
  /** One read-write lock seen from `count` providers, as from as many processes. */
  const rws = async (label: string, count: number) => {
    const name = uniqueKey(label);
    const providers: LockProvider[] = [];
    const handles: ReadWriteLock[] = [];
    for (let i = 0; i < count; i += 1) {
      const provider = await open();
      assert.ok(provider.readWriteLock, `${provider.backend} has no readWriteLock()`);
      providers.push(provider);
      handles.push(provider.readWriteLock(name));
    }
    return { providers, handles };
  };
  /** Three views of one read-write lock (the first one's provider to crash), or undefined to skip. */
  const three = async (label: string) => {
    const { providers, handles } = await rws(label, 3);
    const [a, b, c] = handles as [ReadWriteLock, ReadWriteLock, ReadWriteLock];
    const keeps = await keepsLockDelay(() => b.tryAcquireWrite({ ...ttl, lockDelayMs: 1 }), target.lockDelay);
    return keeps ? { a, b, observer: c, crashable: providers[0] as LockProvider } : undefined;
  };

  t.describe('lock-delay', () => {
    t.it('refuses lockDelayMs outside 0..60000, and on a downgrade, with InvalidArgumentError', async () => {
      const [rw] = (await rws('delay-range', 1)).handles as [ReadWriteLock];
      for (const lockDelayMs of [-1, 60_001, Number.NaN, '100']) {
        const error = await rejectsWith(rw.acquireRead({ lockDelayMs } as never), 'INVALID_ARGUMENT');
        assert.equal((error as Error & { argument?: string }).argument, 'lockDelayMs');
        await rejectsWith(rw.tryAcquireWrite({ lockDelayMs } as never), 'INVALID_ARGUMENT');
      }
      const write = await rw.acquireWrite(ttl);
      const error = await rejectsWith(
        rw.acquireRead({ downgradeFrom: write, lockDelayMs: 100 }),
        'INVALID_ARGUMENT',
      );
      assert.equal((error as Error & { argument?: string }).argument, 'lockDelayMs');
      await write.release();
      assert.deepEqual((await rw.inspect()).delayed, []);
    });

    t.it('a clean release starts no delay, of a read or of a write', async () => {
      const views = await three('delay-release');
      if (!views) return;
      const { a, b } = views;
      const write = await a.acquireWrite({ ...ttl, lockDelayMs: DELAY_MS });
      await write.release();
      const read = await a.acquireRead({ ...ttl, lockDelayMs: DELAY_MS });
      await read.release();
      assert.deepEqual((await b.inspect()).delayed, [], 'no delay after a release');
      const next = await b.tryAcquireWrite(ttl);
      assert.ok(next?.held, 'the write is free right after the releases');
      await next.release();
    });

    const crash = target.faults?.crash;
    if (!crash) return;

    t.it('a lost write keeps out readers and writers for lockDelayMs after the loss', async () => {
      const views = await three('delay-lost-write');
      if (!views) return;
      const { a, b, observer } = views;
      const lost = await a.acquireWrite({ ...ttl, lockDelayMs: DELAY_MS });
      const waiting = pending(b.acquireRead({ ...ttl, waitMs: bound }));
      await eventually('one waiter', async () => (await observer.inspect()).waiters === 1, bound);
      const crashedAt = performance.now();
      await crash(views.crashable);
      const read = await grantedAfterDelay(
        waiting,
        crashedAt,
        DELAY_MS,
        async () => {
          const info = await observer.inspect();
          return info.writer === null && info.delayed.some((d) => d.mode === 'write');
        },
        bound,
      );
      assert.ok(read.fencingToken > lost.fencingToken);
      assert.deepEqual((await observer.inspect()).delayed, [], 'the delay is over');
      await read.release();
    });

    t.it('a lost read keeps out writers for lockDelayMs, and lets readers in', async () => {
      const views = await three('delay-lost-read');
      if (!views) return;
      const { a, b, observer } = views;
      const lost = await a.acquireRead({ ...ttl, lockDelayMs: LONG_DELAY_MS });
      const crashedAt = performance.now();
      await crash(views.crashable);
      const delayedNow = async () => (await observer.inspect()).delayed.some((d) => d.mode === 'read');
      await eventually('the loss and its delay', delayedNow, bound);
      assert.deepEqual((await observer.inspect()).readers, [], 'the lost read is no reader');
      assert.equal(await b.tryAcquireWrite(ttl), null, 'no write during the delay');
      const read = await b.tryAcquireRead(ttl);
      assert.ok(read?.held, 'a read is granted during the delay');
      assert.ok(await delayedNow(), 'the calls above ran inside the delay');
      await read.release();
      const write = await b.acquireWrite({ ...ttl, waitMs: bound });
      assert.ok(performance.now() - crashedAt >= LONG_DELAY_MS, 'the write waited for the delay');
      assert.ok(write.fencingToken > lost.fencingToken);
      assert.deepEqual((await observer.inspect()).delayed, []);
      await write.release();
    });
  });
}
