import assert from 'node:assert/strict';
import type { LockLostError } from '../errors.js';
import type { ReadWriteLock } from '../read-write/types.js';
import type { Lock, LockProvider } from '../types.js';
import { eventually, rejectsWith, releaseStale, uniqueKey } from './helpers.js';
import { describeReadWriteLockDelay } from './recipe-lock-delay-conformance.js';
import type { SemaphoreConformanceTarget, TestApi } from './target.js';

/** What a backend tells the read-write lock conformance suite about itself. */
export type ReadWriteConformanceTarget = Pick<
  SemaphoreConformanceTarget,
  'name' | 'createProvider' | 'ttlMs' | 'holderDeathBoundMs' | 'faults' | 'callTimeoutMs' | 'lockDelay'
>;

/** How long one test may wait for a grant or a state before it counts as a failure, not a hang. */
const WAIT_MS = 20_000;

/** Waits until inspect() reports `count` waiters: a set-up step, bounded like a grant. */
function waitersReach(rw: ReadWriteLock, count: number): Promise<void> {
  return eventually(
    `${count} waiters on ${rw.name}`,
    async () => (await rw.inspect()).waiters === count,
    WAIT_MS,
  );
}

/** A pending acquire whose outcome the test can look at without awaiting it. */
function pending(acquiring: Promise<Lock>): { promise: Promise<Lock>; granted: () => boolean } {
  let done = false;
  const promise = acquiring.then((lock) => {
    done = true;
    return lock;
  });
  promise.catch(() => undefined); // the test awaits it, or it is failed by close()
  return { promise, granted: () => done };
}

/**
 * Registers the read-write lock tests (docs/read-write-locks.md) for one backend. A provider
 * without `readWriteLock()` (a custom one) gets no tests: read-write locks are optional in the
 * LockProvider interface.
 */
export function describeReadWriteConformance(target: ReadWriteConformanceTarget, t: TestApi): void {
  const opened: LockProvider[] = [];
  const open = async (): Promise<LockProvider> => {
    const provider = await target.createProvider();
    opened.push(provider);
    return provider;
  };
  /** The same name seen from `count` providers, as from as many processes. */
  const rws = async (label: string, count: number): Promise<ReadWriteLock[]> => {
    const name = uniqueKey(label);
    const locks: ReadWriteLock[] = [];
    for (let i = 0; i < count; i += 1) {
      const p = await open();
      assert.ok(p.readWriteLock, `${p.backend} has no readWriteLock()`);
      locks.push(p.readWriteLock(name));
    }
    return locks;
  };
  const ttl = { ttlMs: target.ttlMs };
  const wait = { ...ttl, waitMs: WAIT_MS };

  t.describe(`read-write lock conformance: ${target.name}`, () => {
    t.afterEach?.(async () => {
      await Promise.allSettled(opened.splice(0).map((p) => p.close()));
    });

    t.it('refuses a bad name or option and says which', async () => {
      const p = await open();
      assert.ok(p.readWriteLock);
      const make = p.readWriteLock.bind(p);
      await rejectsWith((async () => make('a/../b'))(), 'INVALID_ARGUMENT');
      await rejectsWith((async () => make(''))(), 'INVALID_ARGUMENT');
      const rw = make(uniqueKey('refuse'));
      await rejectsWith(rw.acquireRead({ ttl: 5 } as never), 'INVALID_ARGUMENT');
      await rejectsWith(rw.acquireWrite({ waitMs: -1 }), 'INVALID_ARGUMENT');
      await rejectsWith(rw.withRead('no' as never), 'INVALID_ARGUMENT');
      const read = await rw.acquireRead(ttl);
      const error = await rejectsWith(rw.acquireRead({ downgradeFrom: read }), 'INVALID_ARGUMENT');
      assert.equal((error as Error & { argument?: string }).argument, 'downgradeFrom');
      await read.release();
      assert.deepEqual(await rw.inspect(), {
        name: rw.name,
        writer: null,
        readers: [],
        waiters: 0,
        delayed: [],
      });
    });

    t.it('readers share; inspect and list show them', async () => {
      const [a, b] = await rws('share', 2);
      assert.ok(a && b);
      const first = await a.acquireRead({ ...ttl, owner: 'reader-1' });
      const second = await b.acquireRead({ ...ttl, owner: 'reader-2' });
      const third = await b.tryAcquireRead(ttl);
      assert.ok(third, 'a third reader is let in too');
      assert.ok(first.held && second.held && third.held);
      assert.equal(first.key, a.name);
      assert.notEqual(first.fencingToken, second.fencingToken, 'tokens are unique per name');
      const info = await a.inspect();
      assert.equal(info.writer, null);
      assert.equal(info.waiters, 0);
      assert.deepEqual(
        info.readers.map((r) => r.fencingToken).sort(),
        [first.fencingToken, second.fencingToken, third.fencingToken].sort(),
      );
      assert.ok(info.readers.some((r) => r.owner === 'reader-1'));
      const provider = opened[0] as LockProvider;
      assert.ok((await provider.list?.(a.name))?.includes(a.name), 'list() shows the name');
      await Promise.all([first.release(), second.release(), third.release()]);
      assert.deepEqual((await a.inspect()).readers, []);
    });

    t.it('a writer excludes readers and writers; tryAcquire* answer null while busy', async () => {
      const [a, b] = await rws('exclude', 2);
      assert.ok(a && b);
      const write = await a.acquireWrite({ ...ttl, owner: 'writer' });
      assert.equal(await b.tryAcquireRead(ttl), null, 'no reader while the writer holds');
      assert.equal(await b.tryAcquireWrite(ttl), null, 'no second writer');
      const info = await b.inspect();
      assert.equal(info.writer?.fencingToken, write.fencingToken);
      assert.equal(info.writer?.owner, 'writer');
      assert.deepEqual(info.readers, []);
      await write.release();
      const read = await b.acquireRead(ttl);
      assert.equal(await a.tryAcquireWrite(ttl), null, 'no writer while a reader holds');
      await read.release();
      const again = await a.tryAcquireWrite(ttl);
      assert.ok(again, 'free again once the reader left');
      await again.release();
    });

    t.it('FIFO: a waiting writer blocks the readers who ask after it', async () => {
      const [a, b, c] = await rws('fifo', 3);
      assert.ok(a && b && c);
      const early = await a.acquireRead(ttl);
      const writer = pending(b.acquireWrite(wait));
      await waitersReach(a, 1);
      assert.equal(await c.tryAcquireRead(ttl), null, 'a later reader does not pass the waiting writer');
      const late = pending(c.acquireRead(wait));
      await waitersReach(a, 2);
      assert.equal(writer.granted() || late.granted(), false, 'both wait while the early reader holds');
      await early.release();
      const write = await writer.promise;
      assert.equal(late.granted(), false, 'the later reader waits for the writer');
      assert.ok(write.fencingToken > early.fencingToken);
      await write.release();
      const read = await late.promise;
      assert.ok(read.fencingToken > write.fencingToken, 'granted after the writer');
      await read.release();
    });

    t.it('a writer’s token is greater than every token granted before it', async () => {
      const [a, b] = await rws('tokens', 2);
      assert.ok(a && b);
      const readers = [await a.acquireRead(ttl), await b.acquireRead(ttl), await a.acquireRead(ttl)];
      const writer = pending(b.acquireWrite(wait));
      await waitersReach(a, 1);
      // Released newest first: the writer's token must still beat them all.
      for (const reader of [...readers].reverse()) await reader.release();
      const write = await writer.promise;
      for (const reader of readers) assert.ok(write.fencingToken > reader.fencingToken);
      await write.release();
      const next = await a.acquireWrite(ttl);
      assert.ok(next.fencingToken > write.fencingToken);
      await next.release();
    });

    t.it('downgrade: a read taken while holding the write outlives it; no writer gets in', async () => {
      const [a, b] = await rws('downgrade', 2);
      assert.ok(a && b);
      const write = await a.acquireWrite(ttl);
      const read = await a.acquireRead({ ...ttl, downgradeFrom: write });
      assert.ok(read.held && write.held);
      assert.equal(read.fencingToken, write.fencingToken, 'the read continues the write grant');
      const writer = pending(b.acquireWrite(wait));
      await waitersReach(b, 1);
      await write.release();
      assert.equal(write.held, false);
      assert.equal((write.signal.reason as LockLostError).reason, 'released');
      assert.ok(read.held && !read.signal.aborted, 'the read outlives the write');
      assert.equal(await b.tryAcquireWrite(ttl), null);
      assert.equal(writer.granted(), false, 'no writer while the downgraded read holds');
      await rejectsWith(a.acquireRead({ downgradeFrom: write }), 'INVALID_ARGUMENT');
      await read.release();
      const next = await writer.promise;
      assert.ok(next.fencingToken > read.fencingToken);
      await next.release();
    });

    t.it('waitMs ends a wait with LockTimeoutError and leaves nothing queued', async () => {
      const [a, b] = await rws('timeout', 2);
      assert.ok(a && b);
      const read = await a.acquireRead(ttl);
      await rejectsWith(b.acquireWrite({ ...ttl, waitMs: 100 }), 'LOCK_TIMEOUT');
      await waitersReach(a, 0);
      const write = await a.tryAcquireRead(ttl);
      assert.ok(write, 'the timed-out writer no longer blocks readers');
      await Promise.all([read.release(), write.release()]);
      const held = await a.acquireWrite(ttl);
      await rejectsWith(b.acquireRead({ ...ttl, waitMs: 100 }), 'LOCK_TIMEOUT');
      await waitersReach(a, 0);
      await held.release();
    });

    t.it('an abort ends a wait with AbortError and leaves nothing queued', async () => {
      const [a, b] = await rws('abort', 2);
      assert.ok(a && b);
      const write = await a.acquireWrite(ttl);
      const controller = new AbortController();
      const reader = b.acquireRead({ ...ttl, signal: controller.signal });
      const refused = rejectsWith(reader, 'AbortError');
      await waitersReach(a, 1);
      controller.abort(new Error('stop'));
      await refused;
      await waitersReach(a, 0);
      await rejectsWith(b.acquireWrite({ signal: AbortSignal.abort() }), 'AbortError');
      await write.release();
      assert.deepEqual(await a.inspect(), {
        name: a.name,
        writer: null,
        readers: [],
        waiters: 0,
        delayed: [],
      });
    });

    t.it('release is idempotent and guarded; withRead, withWrite and await using release', async () => {
      const [a, b] = await rws('release', 2);
      assert.ok(a && b);
      const first = await a.acquireWrite(ttl);
      await first.release();
      const second = await b.acquireWrite(ttl);
      await first.release();
      await first[Symbol.asyncDispose]();
      assert.ok(second.held, 'a stale release does not remove the newer grant');
      await second[Symbol.asyncDispose]();
      let seen: Lock | undefined;
      const value = await a.withRead(async (lock) => {
        seen = lock;
        assert.equal(await b.tryAcquireWrite(ttl), null);
        return 7;
      }, ttl);
      assert.equal(value, 7);
      assert.equal(seen?.held, false);
      await assert.rejects(
        b.withWrite(async () => {
          throw new Error('work failed');
        }, ttl),
        /work failed/,
      );
      assert.equal((await a.inspect()).writer, null, 'released after the throw');
    });

    t.it('close() fails waiters, releases what it holds, refuses later calls', async () => {
      const [a, b] = await rws('close', 2);
      assert.ok(a && b);
      const provider = opened[0] as LockProvider;
      const held = await a.acquireRead(ttl);
      await rejectsWith(b.acquireWrite({ ...wait, waitMs: 0 }), 'LOCK_TIMEOUT');
      const writeFromB = pending(b.acquireWrite(wait));
      await waitersReach(a, 1);
      const waiting = a.acquireRead(wait);
      const refused = rejectsWith(waiting, 'PROVIDER_CLOSED');
      await waitersReach(b, 2);
      await provider.close();
      await refused;
      assert.equal(held.held, false);
      const write = await writeFromB.promise;
      assert.ok(write.held, 'the writer got the name once close() released the read');
      await rejectsWith(a.acquireRead(ttl), 'PROVIDER_CLOSED');
      await write.release();
      assert.equal((await b.inspect()).waiters, 0, 'the closed provider left nothing queued');
    });

    const partition = target.faults?.partition;
    if (partition) {
      t.it(
        'a lost grant: its signal aborts before a writer is granted; its release is harmless',
        async () => {
          const [a, b] = await rws('lost', 2);
          assert.ok(a && b);
          const read = await a.acquireRead(ttl);
          let abortedAt = Number.NaN;
          read.signal.addEventListener('abort', () => {
            abortedAt = performance.now();
          });
          const writer = b.acquireWrite({ ...ttl, waitMs: target.holderDeathBoundMs + 2_000 });
          await waitersReach(b, 1);
          await partition(opened[0] as LockProvider, true);
          let write: Lock;
          try {
            write = await writer;
            assert.ok(read.signal.aborted, 'the reader was told before the writer was granted');
            assert.ok(abortedAt < performance.now());
            assert.equal((read.signal.reason as LockLostError).code, 'LOCK_LOST');
            assert.ok(write.fencingToken > read.fencingToken);
          } finally {
            await partition(opened[0] as LockProvider, false);
          }
          await releaseStale(read);
          assert.ok(write.held, 'the stale release did not remove the writer');
          assert.equal((await b.inspect()).writer?.fencingToken, write.fencingToken);
          await write.release();
        },
      );
    }

    describeReadWriteLockDelay(target, t, open);
  });
}
