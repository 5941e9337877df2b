import { describe, expect, it } from 'vitest';
import { namePrefix } from '../../adapters/etcd/keys.js';
import { type Permit, SemaphoreLimitMismatchError } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

// Two requests on one etcd semaphore name with different limits: a request counts the permits of
// the queue keys ahead of it against its own limit, so it must not count those of a request that
// judges by another one (limit 2 taking 2 and limit 4 taking 2 would both be granted: 4 permits
// live where one of them allows 2). A queue key ahead with another recorded limit raises
// SemaphoreLimitMismatchError, as a lease key with one does. No bound here is a speed check.

describe('etcd semaphore: queue keys ahead with another limit', () => {
  const etcd = etcdFixture({ sessionTtlMs: 10_000, callTimeoutMs: 2_000 });

  it('both queued (behind a holder that recorded no limit): the later one gets SemaphoreLimitMismatchError, never both granted', async () => {
    const [operator, first, second] = [etcd.open(), etcd.open(), etcd.open()];
    const name = uniqueKey('sem-limits');
    // A lease key in the old format (no limit recorded: no mismatch), holding 2 permits.
    const oldKey = `${namePrefix(`${operator.namespace}/semaphore/`, name)}leases/old-format`;
    await operator.client
      .put(oldKey)
      .value(JSON.stringify({ permits: 2 }))
      .exec();
    const view = operator.semaphore(name, { limit: 2 });
    const granted: Permit[] = [];
    const take = (p: Permit) => {
      granted.push(p);
      return p;
    };
    const firstWaits = first.semaphore(name, { limit: 2 }).acquire({ permits: 2, waitMs: 20_000 }).then(take);
    firstWaits.catch(() => undefined); // awaited below
    await eventually('the first request queued', async () => (await view.inspect()).waiters === 1, 10_000);
    const secondWaits = second
      .semaphore(name, { limit: 4 })
      .acquire({ permits: 2, waitMs: 20_000 })
      .then(take);
    const secondFailed = secondWaits.then(
      () => undefined,
      (error: unknown) => error,
    );
    // The second fails on reading the queue, while the old key still keeps both waiting: the
    // first's queue key, not a lease, is what it finds of another limit.
    expect(await secondFailed).toBeInstanceOf(SemaphoreLimitMismatchError);
    await operator.client.delete().key(oldKey).exec();
    const p = await firstWaits;
    expect(p.held).toBe(true);
    expect(granted).toEqual([p]);
    const info = await view.inspect();
    expect(info.holders.map((h) => h.permits)).toEqual([2]);
    await p.release();
  }, 40_000);

  it('racing tries for 2 permits with limits 2 and 4 on a free name: never both granted', async () => {
    const [a, b] = [etcd.open(), etcd.open()];
    let both = 0;
    for (let round = 0; round < 30; round++) {
      const name = uniqueKey('sem-limits-race');
      const tries = await Promise.allSettled([
        a.semaphore(name, { limit: 2 }).tryAcquire({ permits: 2 }),
        b.semaphore(name, { limit: 4 }).tryAcquire({ permits: 2 }),
      ]);
      const held = tries.flatMap((t) => (t.status === 'fulfilled' && t.value ? [t.value] : []));
      for (const t of tries)
        if (t.status === 'rejected') expect(t.reason).toBeInstanceOf(SemaphoreLimitMismatchError);
      if (held.length > 1) both += 1;
      await Promise.all(held.map((permit) => permit.release()));
    }
    expect(both, 'rounds in which both were granted').toBe(0);
  }, 60_000);
});
