import assert from 'node:assert/strict';
import type { LockLostError } from '../../errors.js';
import type { Lock } from '../../types.js';
import { rejectsWith, uniqueKey, waitersReach } from '../helpers.js';
import type { LockSuite } from './suite.js';

/** Release: idempotent, never removing a newer grant, and handing the lock to the next waiter. */
export function describeRelease({ t, open, ttl }: LockSuite): void {
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
}
