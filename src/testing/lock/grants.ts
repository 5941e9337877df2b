import assert from 'node:assert/strict';
import { LockLostError } from '../../errors.js';
import type { LockProvider } from '../../types.js';
import { ExclusionMonitor, rejectsWith, sleep, uniqueKey, waitersReach } from '../helpers.js';
import type { LockSuite } from './suite.js';

/** What a grant is: a held lock with a rising bigint token and a visible holder; tryAcquire never waits. */
export function describeGrants({ t, open, ttl }: LockSuite): void {
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
}
