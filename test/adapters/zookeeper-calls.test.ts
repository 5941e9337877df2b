import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { startWireCounter, type WireCounter } from '../../bench/wire-count.mjs';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// What one grant costs on the wire, counted by a proxy: Curator's InterProcessMutex makes 3 calls in
// 3 round trips (create2, getChildren2, delete; see the README's ZooKeeper figures). fencekit makes
// the same; the watch on its own node goes out after the grant, only if the lock is still held then.
describe('ZooKeeper calls per grant', () => {
  let zk: ServerGroup;
  let counter: WireCounter;
  let provider: ZooKeeperLockProvider;
  beforeAll(async () => {
    zk = await startServers('zookeeper');
    counter = await startWireCounter(endpoint(zk, 'ZK_CONNECT'));
    provider = new ZooKeeperLockProvider({
      connectString: counter.connectString,
      sessionTimeoutMs: 4_000,
      serverTickMs: 200,
    });
  });
  afterAll(async () => {
    await provider?.close();
    await counter?.close();
    await zk?.stop();
  });

  it('an uncontended acquire + release takes 3 calls in 3 round trips, as Curator', async () => {
    const key = uniqueKey('calls');
    await (await provider.acquire(key)).release(); // the session and the name's folder exist now
    counter.take();
    const grants = 20;
    for (let i = 0; i < grants; i++) await (await provider.acquire(key)).release();
    const { requests, roundTrips } = counter.take();
    const { multi: heartbeats = 0, ...calls } = requests; // the session's heartbeats, on their own timer
    console.log(`${grants} grants: ${JSON.stringify(requests)}, ${roundTrips} round trips`);
    expect(calls).toEqual({ create2: grants, getChildren: grants, delete: grants });
    expect(roundTrips).toBeGreaterThanOrEqual(3 * grants);
    expect(roundTrips).toBeLessThanOrEqual(3 * grants + heartbeats);
  });

  it('a lock held across I/O arms the watch on its own node with one exists, after the grant', async () => {
    const key = uniqueKey('calls-held');
    await (await provider.acquire(key)).release();
    counter.take();
    const lock = await provider.acquire(key);
    await new Promise((r) => setTimeout(r, 50)); // the holder's work
    const { requests } = counter.take();
    await lock.release();
    expect(requests.exists).toBe(1);
  });
});
