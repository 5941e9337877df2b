import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { namePrefix, prefixEnd } from '../../adapters/etcd/keys.js';
import { markerKey } from '../../adapters/etcd/lock-delay.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

const DELAY_MS = 1_500;
/** Generous: a grant may come late on a loaded machine, never early. */
const BOUND_MS = 30_000;

/**
 * The markers of semaphore and read-write lock-delays on etcd (lock-delay.ts): a clean release
 * leaves none; one left behind (an unanswered release, a grant never handed out) or one of
 * unreadable text delays once and is then deleted by its lease, never locking the name out.
 */
describe('etcd: lock-delay markers of semaphores and read-write locks', () => {
  let etcd: ServerGroup;
  const providers: EtcdLockProvider[] = [];
  const open = () => {
    const provider = new EtcdLockProvider({
      endpoints: endpoint(etcd, 'ETCD_ENDPOINTS').split(','),
      sessionTtlMs: 2_000,
      callTimeoutMs: 2_000,
    });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    etcd = await startServers('etcd');
  });
  afterEach(async () => {
    await Promise.allSettled(providers.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  const folderOf = (provider: EtcdLockProvider, kind: 'semaphore' | 'rw', name: string) =>
    Buffer.from(
      kind === 'semaphore'
        ? `${namePrefix(`${provider.namespace}/semaphore/`, name)}lockdelay/`
        : namePrefix(`${provider.namespace}/rwlock-delay/`, name),
    );
  const markersIn = async (provider: EtcdLockProvider, folder: Buffer) =>
    (await provider.client.kv.range({ key: folder, range_end: prefixEnd(folder) })).kvs;

  it('a clean release of a permit or of a read-write grant leaves no marker', async () => {
    const provider = open();
    const name = uniqueKey('ld-clean');
    const sem = provider.semaphore(name, { limit: 2 });
    const permit = await sem.acquire({ permits: 2, lockDelayMs: DELAY_MS });
    expect(await markersIn(provider, folderOf(provider, 'semaphore', name))).toHaveLength(1);
    await permit.release();
    expect(await markersIn(provider, folderOf(provider, 'semaphore', name))).toHaveLength(0);
    const rw = provider.readWriteLock(name);
    const write = await rw.acquireWrite({ lockDelayMs: DELAY_MS });
    const read = await rw.acquireRead({ downgradeFrom: write });
    await write.release();
    expect(await markersIn(provider, folderOf(provider, 'rw', name))).toHaveLength(1);
    await read.release();
    expect(await markersIn(provider, folderOf(provider, 'rw', name))).toHaveLength(0);
  });

  it('a semaphore marker left behind delays its permits once, then its lease deletes it', async () => {
    const provider = open();
    const name = uniqueKey('ld-left-sem');
    const folder = folderOf(provider, 'semaphore', name);
    // What an unanswered release leaves: the marker of a grant whose lease key is gone.
    await provider.client.put(`${folder.toString()}gone-attempt`).value(`held ${DELAY_MS} 2`);
    const sem = provider.semaphore(name, { limit: 3 });
    expect((await sem.inspect()).delayed.map((d) => d.permits)).toEqual([2]);
    const started = performance.now();
    expect(await sem.tryAcquire({ permits: 2 })).toBeNull(); // stamps the delay
    const one = await sem.tryAcquire();
    expect(one?.held).toBe(true); // the third permit is free
    await one?.release();
    const all = await sem.acquire({ permits: 3, waitMs: BOUND_MS });
    expect(performance.now() - started).toBeGreaterThanOrEqual(DELAY_MS);
    expect(await markersIn(provider, folder)).toHaveLength(0);
    await all.release();
  });

  it('a read-write marker left behind keeps writers out once, then its lease deletes it', async () => {
    const provider = open();
    const name = uniqueKey('ld-left-rw');
    const folder = folderOf(provider, 'rw', name);
    await provider.client.put(`${folder.toString()}write-1-gone`).value(`held ${DELAY_MS} 1`);
    const rw = provider.readWriteLock(name);
    expect((await rw.inspect()).delayed.map((d) => d.mode)).toEqual(['write']);
    const started = performance.now();
    expect(await rw.tryAcquireRead()).toBeNull(); // a lost write keeps readers out too
    const write = await rw.acquireWrite({ waitMs: BOUND_MS });
    expect(performance.now() - started).toBeGreaterThanOrEqual(DELAY_MS);
    expect(await markersIn(provider, folder)).toHaveLength(0);
    await write.release();
  });

  it('a marker of unreadable text is a delay on a lease of its own, not a lockout', async () => {
    const provider = open();
    const name = uniqueKey('ld-garbage');
    const semFolder = folderOf(provider, 'semaphore', name);
    const rwFolder = folderOf(provider, 'rw', name);
    await provider.client.put(`${semFolder.toString()}x`).value('\u0000not a marker 99999999999999999999');
    await provider.client.put(`${rwFolder.toString()}read-x`).value('held 1e9 -1');
    const sem = provider.semaphore(name, { limit: 1 });
    const rw = provider.readWriteLock(name);
    expect((await sem.inspect()).delayed).toHaveLength(1);
    expect(await sem.tryAcquire()).toBeNull();
    const read = await rw.tryAcquireRead(); // a read's delay keeps out writers only
    expect(read?.held).toBe(true);
    await read?.release();
    expect(await rw.tryAcquireWrite()).toBeNull();
    for (const folder of [semFolder, rwFolder]) {
      const [marker] = await markersIn(provider, folder);
      expect(marker?.lease).not.toBe('0'); // stamped: etcd deletes it when the lease ends
      const { TTL } = await provider.client.leaseClient.leaseTimeToLive({ ID: marker?.lease ?? '0' });
      expect(Number(TTL)).toBeGreaterThan(0);
      expect(Number(TTL)).toBeLessThanOrEqual(60);
    }
  });

  it("a plain lock's marker on no lease that is not a holder's is stamped onto a lease, not a lockout", async () => {
    const provider = open();
    for (const text of [`delay ${DELAY_MS}`, 'not a marker']) {
      const name = uniqueKey('ld-lock-garbage');
      // Written by something else: a running delay's form, or unreadable, and on no lease.
      await provider.client.put(markerKey(provider.namespace, name)).value(text);
      expect(await provider.tryAcquire(name)).toBeNull(); // stamps it
      const [marker] = (await provider.client.kv.range({ key: markerKey(provider.namespace, name) })).kvs;
      expect(marker?.lease).not.toBe('0'); // etcd deletes it when the lease ends
      if (text.startsWith('delay')) {
        const lock = await provider.acquire(name, { waitMs: BOUND_MS });
        await lock.release();
      }
    }
  });
});
