import { describe, expect, it } from 'vitest';
import { type EtcdLockProvider, namePrefix } from '../../adapters/etcd/index.js';
import { MAX_SESSION_TTLS } from '../../adapters/etcd/sessions.js';
import type { LockLostError } from '../../src/index.js';
import { rejectsWith, uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

/** The lease of the one key under `prefix`, and the TTL etcd granted it (seconds). */
async function leaseOf(provider: EtcdLockProvider, prefix: string): Promise<{ id: string; ttl: number }> {
  const { kvs } = await provider.client.getAll().prefix(prefix).exec();
  expect(kvs).toHaveLength(1);
  const id = kvs[0]?.lease as string;
  const { grantedTTL } = await provider.client.leaseClient.leaseTimeToLive({ ID: id });
  return { id, ttl: Number(grantedTTL) };
}

/** TTL seconds etcd still grants the lease (-1 once it is gone). */
async function remainingTtl(provider: EtcdLockProvider, id: string): Promise<number> {
  return Number((await provider.client.leaseClient.leaseTimeToLive({ ID: id })).TTL);
}

describe('etcd: an acquire’s ttlMs is its lease TTL', () => {
  // A long provider session, so that only the acquires' own TTLs can free their keys early.
  const etcd = etcdFixture({ sessionTtlMs: 30_000 });
  const { open, throughProxy } = etcd;

  it('ttlMs picks a session of that TTL, rounded up to whole seconds; without it, sessionTtlMs', async () => {
    const provider = open();
    const [short, same, plain] = [uniqueKey('ttl-short'), uniqueKey('ttl-same'), uniqueKey('ttl-plain')];
    const a = await provider.acquire(short, { ttlMs: 2_500 });
    const b = await provider.acquire(same, { ttlMs: 3_000 });
    const c = await provider.acquire(plain);
    const [leaseA, leaseB, leaseC] = await Promise.all([
      leaseOf(provider, namePrefix('', short)),
      leaseOf(provider, namePrefix('', same)),
      leaseOf(provider, namePrefix('', plain)),
    ]);
    expect(leaseA.ttl).toBe(3);
    expect(leaseB.id).toBe(leaseA.id); // 2.5 s and 3 s are the same whole-second TTL: one session
    expect(leaseC.ttl).toBe(30);
    // The fencing token is still the key's create revision.
    expect((await provider.inspect(short))?.holder?.fencingToken).toBe(a.fencingToken);
    await Promise.all([a.release(), b.release(), c.release()]);
  });

  it('an abandoned holder: its short-TTL lock is free within that TTL while its long one is still held', async () => {
    const holder = open();
    const other = open();
    const [short, long] = [uniqueKey('abandoned-short'), uniqueKey('abandoned-long')];
    await holder.acquire(short, { ttlMs: 2_000 });
    const longLock = await holder.acquire(long, { ttlMs: 25_000 });
    await holder.abandon(); // as a killed process: no revoke, the leases run out on the server
    // 2 s TTL; a generous bound, still well short of the long lock's 25 s.
    const granted = await other.acquire(short, { waitMs: 12_000 });
    expect(granted.held).toBe(true);
    expect((await other.inspect(long))?.holder?.fencingToken).toBe(longLock.fencingToken);
    expect(await other.tryAcquire(long)).toBeNull();
    await granted.release();
  }, 30_000);

  it('a lock on a TTL session loses its signal when keepalives stop, before anyone else is granted', async () => {
    await throughProxy(async (proxy) => {
      const cut = open({ endpoints: [`http://${proxy.address}`], callTimeoutMs: 1_000 });
      const other = open();
      const key = uniqueKey('ttl-session-loss');
      const lock = await cut.acquire(key, { ttlMs: 3_000 });
      proxy.setMode({ kind: 'blackhole' });
      const next = await other.acquire(key, { waitMs: 15_000 }); // once the 3 s lease expired on the server
      expect(lock.signal.aborted).toBe(true);
      expect((lock.signal.reason as LockLostError).reason).toBe('unconfirmed');
      expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
      await next.release();
      proxy.setMode({ kind: 'pass' });
    });
  }, 30_000);

  it(`at most ${MAX_SESSION_TTLS} distinct TTLs besides sessionTtlMs; close() revokes every session`, async () => {
    const provider = open();
    const observer = open();
    // 9..16 s: long enough that no session is lost to a stalled test machine meanwhile.
    const locks = [];
    for (let seconds = 1; seconds <= MAX_SESSION_TTLS; seconds++) {
      locks.push(await provider.acquire(uniqueKey(`ttl-${seconds}`), { ttlMs: seconds * 1000 + 8_000 }));
    }
    await rejectsWith(provider.acquire(uniqueKey('ttl-one-too-many'), { ttlMs: 60_000 }), 'INVALID_ARGUMENT');
    // A TTL it has (rounded the same), and sessionTtlMs, are still served.
    const again = await provider.acquire(uniqueKey('ttl-again'), { ttlMs: 8_500 });
    const plain = await provider.acquire(uniqueKey('ttl-plain-after-cap'));
    expect((await leaseOf(observer, namePrefix('', plain.key))).ttl).toBe(30);
    const leases = new Set<string>();
    for (const lock of [...locks, again]) {
      const { kvs } = await observer.client.getAll().prefix(namePrefix('', lock.key)).exec();
      leases.add(kvs[0]?.lease as string);
    }
    expect(leases.size).toBe(MAX_SESSION_TTLS);
    await provider.close();
    for (const id of leases) expect(await remainingTtl(observer, id)).toBe(-1);
  }, 30_000);

  it('a semaphore permit with ttlMs is on a lease of that TTL', async () => {
    const provider = open();
    const name = uniqueKey('ttl-semaphore');
    const permit = await provider.semaphore(name, { limit: 2 }).acquire({ ttlMs: 4_000 });
    const lease = await leaseOf(provider, `${namePrefix('/semaphore/', name)}leases/`);
    expect(lease.ttl).toBe(4);
    await permit.release();
  });

  it('a ttlMs in the provider’s options is honoured by acquires without one, campaigns included', async () => {
    const provider = open({ ttlMs: 5_000 });
    const key = uniqueKey('ttl-provider-default');
    const lock = await provider.acquire(key);
    expect((await leaseOf(provider, namePrefix('', key))).ttl).toBe(5);
    await lock.release();
    const name = uniqueKey('ttl-election');
    const term = await provider.election(name).campaign('me');
    expect((await leaseOf(provider, namePrefix('', name))).ttl).toBe(5);
    await term.resign();
  });
});
