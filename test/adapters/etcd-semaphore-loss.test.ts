import { describe, expect, it } from 'vitest';
import type { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { namePrefix } from '../../adapters/etcd/keys.js';
import type { LockLostError } from '../../src/index.js';
import { releaseStale } from '../../src/testing/helpers.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

// A semaphore permit on etcd is lost as a lock is: when its key is deleted by anyone but its holder
// (an operator's `etcdctl del`), its signal aborts ('revoked'); it used to stay quiet while the
// freed permit went to a waiter. And a waiter whose session is lost re-enqueues on a new session at
// once instead of waiting out its waitMs. Bounds are generous: a 2× slower machine passes, the old
// code never does (nothing happens there until waitMs or a release).

/** A semaphore's keys under `part` ('leases/' or 'locks/'), oldest first. */
async function keysOf(provider: EtcdLockProvider, name: string, part: 'leases/' | 'locks/') {
  const prefix = `${namePrefix(`${provider.namespace}/semaphore/`, name)}${part}`;
  const { kvs } = await provider.client.getAll().prefix(prefix).sort('Create', 'Ascend').exec();
  return kvs.map((kv) => ({ key: kv.key.toString(), lease: kv.lease, revision: BigInt(kv.create_revision) }));
}

describe('etcd semaphore: a permit whose key is deleted, a waiter whose session is lost', () => {
  const etcd = etcdFixture({ sessionTtlMs: 20_000, callTimeoutMs: 2_000 });

  it("a permit whose key is deleted by another client: its signal aborts ('revoked'), and a waiter gets the permit", async () => {
    const holder = etcd.open();
    const waiter = etcd.open();
    const operator = etcd.open();
    const name = uniqueKey('sem-del');
    const permit = await holder.semaphore(name, { limit: 1 }).acquire();
    const waiting = waiter.semaphore(name, { limit: 1 }).acquire({ waitMs: 30_000 });
    await eventually(
      'the waiter queued',
      async () => (await keysOf(operator, name, 'locks/')).length === 1,
      10_000,
    );
    const [permitKey] = await keysOf(operator, name, 'leases/');
    expect(permitKey?.revision).toBe(permit.fencingToken);
    await operator.client.delete().key(permitKey?.key as string);
    await eventually('the holder’s signal aborted', async () => permit.signal.aborted, 10_000);
    expect((permit.signal.reason as LockLostError).reason).toBe('revoked');
    expect(permit.held).toBe(false);
    const next = await waiting;
    expect(next.fencingToken).toBeGreaterThan(permit.fencingToken);
    await releaseStale(permit); // its key is gone already: it may say so, nothing else
    await next.release();
  });

  it('a waiter whose session is revoked re-enqueues on a new session at once, not after its waitMs', async () => {
    const holder = etcd.open();
    // A short session: its keepalive (every ttl/3) hears of the revoke within about a second.
    const waiter = etcd.open({ sessionTtlMs: 3_000 });
    const operator = etcd.open();
    const name = uniqueKey('sem-waiter-lost');
    const permit = await holder.semaphore(name, { limit: 1 }).acquire();
    let settled = false;
    const waiting = waiter.semaphore(name, { limit: 1 }).acquire({ waitMs: 60_000 });
    waiting.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    await eventually(
      'the waiter queued',
      async () => (await keysOf(operator, name, 'locks/')).length === 1,
      10_000,
    );
    const revoked = (await keysOf(operator, name, 'locks/'))[0]?.lease as string;
    await operator.client.leaseClient.leaseRevoke({ ID: revoked });
    await eventually(
      'the waiter re-enqueued on a new session',
      async () => {
        const queue = await keysOf(operator, name, 'locks/');
        return queue.length === 1 && queue[0]?.lease !== revoked;
      },
      15_000,
    );
    expect(settled).toBe(false);
    await permit.release();
    const next = await waiting;
    expect(next.held).toBe(true);
    expect(next.fencingToken).toBeGreaterThan(permit.fencingToken);
    await next.release();
  });
});
