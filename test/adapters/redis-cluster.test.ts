import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisLockProvider } from '../../adapters/redis/index.js';
import { readWriteKeys } from '../../adapters/redis/read-write-scripts.js';
import { lockKeys } from '../../adapters/redis/scripts.js';
import { connect, type LockLostError, type LockProvider } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { RedisCluster } from '../servers/redis-cluster.js';

/** The Redis adapter on a real 3-master Redis Cluster (redis-server --cluster-enabled yes). */
describe('Redis Cluster', () => {
  let cluster: RedisCluster;
  let raw: Cluster;
  const providers: LockProvider[] = [];
  const open = async () => {
    const provider = await connect(`redis+cluster://${cluster.nodes.join(',')}`);
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    cluster = await RedisCluster.start();
    raw = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })));
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    raw?.disconnect();
    await cluster?.stop();
  });

  it('every key of a name lies in one hash slot, whatever braces the name holds', async () => {
    const slotsOf = async (name: string) =>
      new Set(
        await Promise.all(
          Object.values(lockKeys('fencekit:', name)).map(
            (key) => raw.call('CLUSTER', 'KEYSLOT', key) as Promise<number>,
          ),
        ),
      );
    for (const name of ['}x', '}', '}}a{b}', 'a}b', '{x}', 'x{}y', 'plain/name']) {
      const slots = await slotsOf(name);
      for (const key of readWriteKeys('fencekit:', name)) {
        slots.add((await raw.call('CLUSTER', 'KEYSLOT', key)) as number);
      }
      expect({ name, slots: [...slots] }).toEqual({ name, slots: [expect.any(Number)] });
    }
    // The escape keeps names apart: '}x' and ' }x' (not a valid name) would be the only clash.
    expect(lockKeys('fencekit:', '}x').lock).not.toBe(lockKeys('fencekit:', 'x').lock);
  });

  it('redis+cluster://: locks on names across every master, a waiter handed the key, rising tokens', async () => {
    const [a, b] = [await open(), await open()];
    expect(a.backend).toBe('redis');
    // Enough names that every master serves some (30 random slots all missing one master: < 1e-5).
    const names = Array.from({ length: 30 }, (_, i) => uniqueKey(`cluster-${i}`));
    names.push(`}${uniqueKey('brace')}`);
    for (const name of names) {
      const first = await a.acquire(name, { ttlMs: 5_000, owner: 'a' });
      expect((await b.inspect(name))?.holder?.fencingToken).toBe(first.fencingToken);
      const waiting = b.acquire(name, { ttlMs: 5_000, waitMs: 5_000 });
      await eventually('b queued', async () => (await a.inspect(name))?.waiters === 1);
      await first.release();
      const second = await waiting;
      expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
      await second.release();
    }
    // Each master kept some names' fence counters: all three served locks.
    const sizes = await Promise.all(raw.nodes('master').map((node) => node.dbsize()));
    expect(sizes).toHaveLength(3);
    for (const size of sizes) expect(size).toBeGreaterThan(0);
    expect((a as RedisLockProvider).wakeups + (b as RedisLockProvider).wakeups).toBeGreaterThan(0);
  });
  it('list() sees names on every master; forceRelease hands the key on and the holder learns revoked', async () => {
    const [a, b, operator] = [await open(), await open(), await open()];
    const prefix = `${uniqueKey('cluster-list')}/`;
    // 30 names: every master serves some (all missing one master: < 1e-5).
    const names = Array.from({ length: 30 }, (_, i) => `${prefix}n${i}`);
    const locks = await Promise.all(names.map((name) => a.acquire(name, { ttlMs: 1_000 })));
    const brace = `}${uniqueKey('cluster-list-brace')}`;
    const braced = await a.acquire(brace, { ttlMs: 1_000 });
    expect(await operator.list?.(prefix)).toEqual([...names].sort());
    expect(await operator.list?.('}fencekit-conformance/cluster-list-brace/')).toEqual([brace]);
    // A fresh provider that knows one seed node: its first list() must still scan every master.
    const seeded = await connect(`redis+cluster://${cluster.nodes[0]}`);
    providers.push(seeded);
    expect(await seeded.list?.(prefix)).toEqual([...names].sort());
    const [first] = locks;
    if (!first) throw new Error('no lock');
    const waiting = b.acquire(first.key, { ttlMs: 1_000, waitMs: 5_000 });
    await eventually('b queued', async () => (await operator.inspect(first.key))?.waiters === 1);
    const removed = await operator.forceRelease?.(first.key, { reason: 'cluster test' });
    expect(removed?.fencingToken).toBe(first.fencingToken);
    const next = await waiting;
    expect(next.fencingToken).toBeGreaterThan(first.fencingToken);
    await eventually('the holder learns it', async () => first.signal.aborted, 3_000);
    expect((first.signal.reason as LockLostError).reason).toBe('revoked');
    await Promise.all([...locks, braced, next].map((lock) => lock.release()));
    expect(await operator.list?.(prefix)).toEqual([]);
  });

  it('read-write locks: readers share, a waiting writer is handed the name, list() sees it, on names across every master', async () => {
    const [a, b] = [await open(), await open()];
    const prefix = `${uniqueKey('cluster-rw')}/`;
    // 30 names: every master serves some (all missing one master: < 1e-5).
    const names = Array.from({ length: 30 }, (_, i) => `${prefix}n${i}`);
    names.push(`}${uniqueKey('cluster-rw-brace')}`);
    for (const name of names) {
      const [ra, rb] = [a.readWriteLock?.(name), b.readWriteLock?.(name)];
      if (!ra || !rb) throw new Error('no readWriteLock()');
      const reads = [await ra.acquireRead({ ttlMs: 5_000 }), await rb.acquireRead({ ttlMs: 5_000 })];
      const writing = rb.acquireWrite({ ttlMs: 5_000, waitMs: 5_000 });
      await eventually('the writer queued', async () => (await ra.inspect()).waiters === 1);
      expect(await ra.tryAcquireRead({ ttlMs: 5_000 })).toBeNull();
      await Promise.all(reads.map((read) => read.release()));
      const write = await writing;
      for (const read of reads) expect(write.fencingToken).toBeGreaterThan(read.fencingToken);
      expect((await a.list?.(name))?.includes(name)).toBe(true);
      await write.release();
    }
    expect(await a.list?.(prefix)).toEqual([]);
  });
});
