import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { uniqueKey, waitersReach } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// Acquires of one name inside one provider line up in process: the name's folder holds one node
// per provider, however many of its requests wait, so each request's listing stays short.
describe('ZooKeeper: one node per provider and name', () => {
  let zk: ServerGroup;
  let a: ZooKeeperLockProvider;
  let b: ZooKeeperLockProvider;
  let raw: ZkClient;
  beforeAll(async () => {
    zk = await startServers('zookeeper');
    const options = { connectString: endpoint(zk, 'ZK_CONNECT'), sessionTimeoutMs: 4_000 };
    [a, b] = [new ZooKeeperLockProvider(options), new ZooKeeperLockProvider(options)];
    raw = await ZkClient.connect({ ...options, callTimeoutMs: 5_000 }, { timeoutMs: 5_000 });
  });
  afterAll(async () => {
    await Promise.allSettled([a?.close(), b?.close(), raw?.close()]);
    await zk?.stop();
  });

  const nodesOf = async (key: string) =>
    (await raw.getChildren(a.folder(key))).filter((child) => child.includes('lock-')).length;

  it('waiters of one provider wait in process; inspect counts them; they are granted in order', async () => {
    const key = uniqueKey('line');
    const holder = await b.acquire(key);
    const order: number[] = [];
    const waits = [0, 1, 2, 3, 4].map((i) =>
      a.acquire(key, { waitMs: 30_000 }).then(async (lock) => {
        order.push(i);
        await lock.release();
      }),
    );
    await waitersReach(a, key, 5);
    // b's holder and a's first waiter: a's other four wait in process.
    expect(await nodesOf(key)).toBe(2);
    expect((await b.inspect(key))?.waiters).toBe(1);
    await holder.release();
    await Promise.all(waits);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it('a try finds the name busy while a request of the same provider waits for it', async () => {
    const key = uniqueKey('try-line');
    const holder = await b.acquire(key);
    const waiting = a.acquire(key, { waitMs: 30_000 });
    await waitersReach(b, key, 1);
    expect(await a.tryAcquire(key)).toBeNull();
    await holder.release();
    await (await waiting).release();
    expect(await a.inspect(key)).toBeNull();
  });
  it('inspect during a lock-delay nobody waits out counts no waiter', async () => {
    const key = uniqueKey('delay-alone');
    await a.acquire(key, { lockDelayMs: 5_000 });
    expect(await b.forceRelease(key, { reason: 'test' })).toBeTruthy();
    const info = await b.inspect(key);
    expect(info?.delayedUntil).toBeInstanceOf(Date);
    expect(info?.waiters).toBe(0);
  });
});
