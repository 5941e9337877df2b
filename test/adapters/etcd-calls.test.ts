import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { countEtcdCalls, type EtcdCallCounter } from '../../bench/etcd-call-count.mjs';
import { uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

// What one grant costs: Go's concurrency.Mutex makes two writes per uncontended lock + unlock, a
// create-if-absent Txn and a delete. fencekit makes the same two: the enqueue Txn (which reads the
// queue's head and the name's lock-delay marker in the same revision) and the guarded delete. The
// session's lease and the provider's deletion watch are made once, before the first grant.
describe('etcd calls per grant', () => {
  const etcd = etcdFixture();
  let provider: EtcdLockProvider;
  let counter: EtcdCallCounter;
  beforeAll(() => {
    provider = etcd.open();
    counter = countEtcdCalls(provider.client);
  });
  afterAll(async () => {
    await provider?.close();
  });

  it('an uncontended acquire + release takes 2 Txns, as Go’s concurrency.Mutex', async () => {
    const key = uniqueKey('calls');
    await (await provider.acquire(key)).release(); // the session and the deletion watch exist now
    counter.take();
    const grants = 20;
    for (let i = 0; i < grants; i++) await (await provider.acquire(key)).release();
    const { calls, watches } = counter.take();
    console.log(`${grants} grants: ${JSON.stringify(calls)}, ${watches} watches`);
    expect(calls).toEqual({ 'KV.txn': 2 * grants });
    expect(watches).toBe(0);
  });

  it('a tryAcquire + release of a free name takes the same 2 Txns', async () => {
    const key = uniqueKey('calls-try');
    await (await provider.acquire(key)).release();
    counter.take();
    const grants = 10;
    for (let i = 0; i < grants; i++) await (await provider.tryAcquire(key))?.release();
    expect(counter.take().calls).toEqual({ 'KV.txn': 2 * grants });
  });

  it('a lock with a lock-delay adds one Txn, its marker’s put (its release deletes both)', async () => {
    const key = uniqueKey('calls-delay');
    await (await provider.acquire(key, { lockDelayMs: 1_000 })).release();
    counter.take();
    const grants = 10;
    for (let i = 0; i < grants; i++) await (await provider.acquire(key, { lockDelayMs: 1_000 })).release();
    expect(counter.take().calls).toEqual({ 'KV.txn': 3 * grants });
  });
});

// close() hands its locks to the session lease's revoke, as Go's Session.Close: one call deletes
// every key, where a delete per lock (100,000 held) saturated the client for minutes.
describe('etcd calls on close', () => {
  const etcd = etcdFixture();

  it('close() with 200 locks held revokes the lease once and sends no delete', async () => {
    const provider = etcd.open();
    const counter = countEtcdCalls(provider.client);
    const keys = Array.from({ length: 200 }, (_, i) => uniqueKey(`close-${i}`));
    const locks = await Promise.all(keys.map((key) => provider.acquire(key)));
    counter.take();
    await provider.close();
    const { calls } = counter.take();
    expect(calls['KV.txn'] ?? 0).toBe(0);
    expect(calls['KV.deleteRange'] ?? 0).toBe(0);
    expect(calls['Lease.leaseRevoke']).toBe(1);
    expect(locks.every((lock) => lock.signal.aborted && !lock.held)).toBe(true);
    const other = etcd.open();
    try {
      for (const key of keys.slice(0, 20)) expect(await other.inspect(key)).toBeNull();
    } finally {
      await other.close();
    }
  });
});
