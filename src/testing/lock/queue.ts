import assert from 'node:assert/strict';
import type { Lock, LockProvider, QueuedWaiter } from '../../types.js';
import { eventually, rejectsWith, uniqueKey, waitersReach } from '../helpers.js';
import type { LockSuite } from './suite.js';

/** queue() of a provider that has it; the suite checks elsewhere that one without it says so. */
function queueOf(provider: LockProvider): NonNullable<LockProvider['queue']> {
  assert.ok(provider.queue, 'the target says the provider has queue()');
  return provider.queue.bind(provider);
}

/** An entry stands for one request, or for a line whose length only its own process knows. */
function assertEntryShape(entry: QueuedWaiter, at: number): void {
  assert.ok(
    entry.requests === 1 || entry.requests === undefined,
    `entry ${at} stands for one waiter of its client, not ${String(entry.requests)}`,
  );
  assert.ok(
    entry.since === undefined || (entry.since instanceof Date && !Number.isNaN(entry.since.getTime())),
    `entry ${at}'s since is a valid Date or undefined`,
  );
}

/** provider.queue(key): the waiters in the order they will be granted, with what the backend records. */
export function describeQueue({ t, open, ttl, target }: LockSuite): void {
  t.describe('queue()', () => {
    t.it('queue() refuses a bad key or limit with INVALID_ARGUMENT', async () => {
      const p = await open();
      if (!p.queue) return; // a provider of your own without queue(): nothing to refuse
      const key = uniqueKey('queue-args');
      for (const limit of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '3', null]) {
        await rejectsWith(p.queue(key, { limit: limit as number }), 'INVALID_ARGUMENT');
      }
      await rejectsWith(p.queue(key, { limits: 3 } as never), 'INVALID_ARGUMENT');
      await rejectsWith(p.queue('', {}), 'INVALID_ARGUMENT');
      await rejectsWith(p.queue('a//b'), 'INVALID_ARGUMENT');
    });

    if (target.queue === undefined) {
      // The target does not say what its queue shows: its order is not tested, its answer is.
      t.it('queue() is absent, refuses with NOT_IMPLEMENTED, or is [] when nobody waits', async () => {
        const p = await open();
        if (!p.queue) return;
        const answer = await p.queue(uniqueKey('queue-unsaid')).catch((error: unknown) => error);
        if (Array.isArray(answer)) assert.deepEqual(answer, []);
        else assert.equal((answer as { code?: unknown }).code, 'NOT_IMPLEMENTED', String(answer));
      });
      return;
    }
    const view = target.queue;

    t.it('queue() is [] when nobody waits, held or not', async () => {
      const p = await open();
      const queue = queueOf(p);
      const key = uniqueKey('queue-empty');
      assert.deepEqual(await queue(key), [], 'a name nobody asked for');
      const lock = await p.acquire(key, ttl);
      assert.deepEqual(await queue(key), [], 'held, nobody waiting');
      await lock.release();
      assert.deepEqual(await queue(key), [], 'released');
    });

    if (!target.fifo) return;

    t.it('queue() lists waiters of three clients in the order they will be granted', async () => {
      const holder = await open();
      const waiters = [await open(), await open(), await open()];
      const key = uniqueKey('queue-order');
      const first = await holder.acquire(key, ttl);
      const owners = ['waiter-a', 'waiter-b', 'waiter-c'];
      const granted: Array<Promise<Lock>> = [];
      for (const [index, waiter] of waiters.entries()) {
        granted.push(waiter.acquire(key, { ...ttl, owner: owners[index], waitMs: 30_000 }));
        // Each is in the backend's queue before the next one asks.
        await waitersReach(holder, key, index + 1);
      }
      const seen = await queueOf(holder)(key);
      assert.equal(seen.length, 3, `three entries, got ${JSON.stringify(seen)}`);
      seen.forEach(assertEntryShape);
      if (view === 'owners') {
        assert.deepEqual(
          seen.map((entry) => entry.owner),
          owners,
          'the owners, in the order they asked',
        );
      }
      // Every client finds its own request where it asked, with its owner: on every backend.
      for (const [index, waiter] of waiters.entries()) {
        const own = (await queueOf(waiter)(key))[index];
        assert.equal(own?.owner, owners[index], `waiter ${index} sees itself at ${index}`);
        assert.equal(own?.requests, 1, `waiter ${index}'s entry is its one request`);
      }
      const firstTwo = await queueOf(holder)(key, { limit: 2 });
      assert.equal(firstTwo.length, 2, 'limit: the first two only');
      if (view === 'owners')
        assert.deepEqual(
          firstTwo.map((entry) => entry.owner),
          owners.slice(0, 2),
        );

      await first.release();
      const next = await (granted[0] as Promise<Lock>);
      await eventually('the granted waiter left the queue', async () => {
        const left = await queueOf(holder)(key);
        return left.length === 2 && (view !== 'owners' || left[0]?.owner === owners[1]);
      });
      await next.release();
      await (await (granted[1] as Promise<Lock>)).release();
      await (await (granted[2] as Promise<Lock>)).release();
      assert.deepEqual(await queueOf(holder)(key), [], 'everyone served: nobody waits');
    });
  });
}
