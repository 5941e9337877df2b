import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { MARKER_NAME } from '../../adapters/zookeeper/lock-delay.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { CreateMode, OPEN_ACL_UNSAFE } from '../../adapters/zookeeper/wire/ops.js';
import { startWireCounter, type WireCounter } from '../../bench/wire-count.mjs';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';
import { expectGrantedAfterDelay } from './scenarios.js';

// What one grant costs on the wire, counted by a proxy: Curator's InterProcessMutex makes 3 calls in
// 3 round trips (create2, getChildren2, delete; see the ZooKeeper figures in docs/benchmarks.md). fencekit makes
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
      // The counts below are per grant: an empty folder's delete, due 1 s after some release,
      // must not land between two grants of a loop that a loaded machine stretches past 1 s.
      folderLingerMs: 60_000,
    });
  });
  afterAll(async () => {
    await provider?.close();
    await counter?.close();
    await zk?.stop();
  });

  /**
   * A client queued in a semaphore's mutex as Curator's InterProcessMutex would be: its own
   * `_c_<uuid>-lock-` node in `<name>/locks` (fencekit refuses that lock name), deleted to hand on.
   */
  const inMutex = async (client: ZkClient, name: string) => {
    const path = await client.create(
      `${provider.folder(name)}/locks/_c_${crypto.randomUUID()}-lock-`,
      Buffer.alloc(0),
      OPEN_ACL_UNSAFE,
      CreateMode.EPHEMERAL_SEQUENTIAL,
    );
    return { release: () => client.delete(path) };
  };
  const rawClient = () =>
    ZkClient.connect(
      { connectString: endpoint(zk, 'ZK_CONNECT'), sessionTimeoutMs: 4_000, callTimeoutMs: 5_000 },
      { timeoutMs: 5_000 },
    );

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

  // Curator's InterProcessSemaphoreV2 takes 7 calls in 6 round trips per uncontended acquire +
  // release (create2 lock, getChildren2 locks, create2 lease, getChildren2 leases, delete lock,
  // delete lease, and removeWatches). fencekit reads the stored limit, creates its lease and counts
  // the leases in one round trip (a session's calls are applied in order), and leaves an empty
  // leases folder for folderLingerMs instead of trying to delete it at every release. The lease
  // step also lists the semaphore's folder (its lock-delay markers), in the same round trip.
  it('an uncontended semaphore acquire + release takes at most 5 round trips and no folder calls', async () => {
    const sem = provider.semaphore(uniqueKey('calls-sem'), { limit: 2 });
    await (await sem.acquire()).release(); // the session and the folders exist now
    counter.take();
    const grants = 20;
    for (let i = 0; i < grants; i++) await (await sem.acquire()).release();
    const { requests, roundTrips } = counter.take();
    const { multi: heartbeats = 0, exists = 0, ...calls } = requests;
    console.log(`${grants} semaphore grants: ${JSON.stringify(requests)}, ${roundTrips} round trips`);
    // exists: the watch on our lease node, sent after the grant unless released first.
    expect(calls).toEqual({
      create2: 2 * grants,
      getChildren: 3 * grants,
      getData: grants,
      delete: 2 * grants,
    });
    expect(exists).toBeLessThanOrEqual(grants);
    expect(roundTrips).toBeLessThanOrEqual(5 * grants + heartbeats);
  });

  it("a semaphore waiter next in the mutex's queue takes its turn without listing the queue again", async () => {
    const name = uniqueKey('calls-sem-turn');
    // The semaphore's mutex held by another session.
    const other = new ZooKeeperLockProvider({
      connectString: endpoint(zk, 'ZK_CONNECT'),
      sessionTimeoutMs: 4_000,
      serverTickMs: 200,
    });
    const raw = await rawClient();
    try {
      // A permit held (limit 2) keeps the leases folder: the turn below finds it.
      const permit = await other.semaphore(name, { limit: 2 }).acquire();
      const mutex = await inMutex(raw, name);
      await (await provider.semaphore(uniqueKey('calls-warm'), { limit: 1 }).acquire()).release(); // our session
      counter.take();
      const waiting = provider.semaphore(name, { limit: 2 }).acquire({ waitMs: 20_000 });
      const info = () => other.semaphore(name, { limit: 2 }).inspect();
      await expect.poll(async () => (await info()).waiters, { timeout: 10_000 }).toBe(2);
      await mutex.release(); // our turn
      await (await waiting).release();
      const { requests } = counter.take();
      await permit.release();
      console.log(`waiter next in the mutex's queue: ${JSON.stringify(requests)}`);
      // One listing of the mutex's queue (Curator: two, one more after the wake-up), one of the leases,
      // one of the semaphore's folder (lock-delay markers) sent with it.
      expect(requests.getChildren).toBe(3);
    } finally {
      await raw.close();
      await other.close();
    }
  });

  it('a semaphore waiter woken further back sends its lease step with the listing that confirms its turn', async () => {
    const name = uniqueKey('calls-sem-spec');
    const other = new ZooKeeperLockProvider({
      connectString: endpoint(zk, 'ZK_CONNECT'),
      sessionTimeoutMs: 4_000,
      serverTickMs: 200,
    });
    const raw = await rawClient();
    try {
      const permit = await other.semaphore(name, { limit: 2 }).acquire(); // keeps the leases folder
      const first = await inMutex(raw, name);
      const ahead = await inMutex(raw, name);
      const info = () => other.semaphore(name, { limit: 2 }).inspect();
      await expect.poll(async () => (await info()).waiters, { timeout: 10_000 }).toBe(2);
      counter.take();
      const waiting = provider.semaphore(name, { limit: 2 }).acquire({ waitMs: 20_000 });
      await expect.poll(async () => (await info()).waiters, { timeout: 10_000 }).toBe(3);
      // Our node shows before our watch on the node ahead is armed (an exists): on a loaded machine
      // that exists could otherwise fall into the window counted below.
      let armed = 0;
      await expect
        .poll(() => (armed += counter.take().requests.exists ?? 0), { timeout: 10_000 })
        .toBeGreaterThanOrEqual(1);
      await first.release();
      counter.take();
      await ahead.release(); // our node was third: woken, we list the queue again
      const held = await waiting;
      const { requests, roundTrips } = counter.take();
      await held.release();
      await permit.release();
      console.log(`turn after a wake-up: ${JSON.stringify(requests)}, ${roundTrips} round trips`);
      const { multi: heartbeats = 0 } = requests;
      // The listing and the lease step in one round trip, then leaving the mutex (with the watch on
      // our lease node, armed meanwhile). Curator: 4 (getChildren2, create2, getChildren2, delete).
      expect(roundTrips).toBeLessThanOrEqual(2 + heartbeats);
    } finally {
      await raw.close();
      await other.close();
    }
  });

  it('a lease step sent for a turn that was not ours is taken back at once', async () => {
    const name = uniqueKey('calls-sem-spec-back');
    const other = new ZooKeeperLockProvider({
      connectString: endpoint(zk, 'ZK_CONNECT'),
      sessionTimeoutMs: 4_000,
      serverTickMs: 200,
    });
    const raw = await rawClient();
    try {
      const permit = await other.semaphore(name, { limit: 2 }).acquire();
      const first = await inMutex(raw, name);
      const second = await inMutex(raw, name);
      const info = () => other.semaphore(name, { limit: 2 }).inspect();
      await expect.poll(async () => (await info()).waiters, { timeout: 10_000 }).toBe(2);
      counter.take();
      // Settled from the start: a wait that fails is reported as this test's failure, not as unhandled.
      const waiting = provider
        .semaphore(name, { limit: 2 })
        .acquire({ waitMs: 60_000 })
        .then(
          (granted) => ({ granted, error: undefined }),
          (error: unknown) => ({ granted: undefined, error }),
        );
      await expect.poll(async () => (await info()).waiters, { timeout: 10_000 }).toBe(3);
      // Our node shows before our watch on the node ahead is armed (an exists): released before
      // that, the node ahead would be gone from our first listing, and no turn would look like ours.
      let armed = 0;
      await expect
        .poll(() => (armed += counter.take().requests.exists ?? 0), { timeout: 10_000 })
        .toBeGreaterThanOrEqual(1);
      await second.release(); // the node ahead of ours goes, but the head still holds the mutex
      // Every request of ours from here on, summed (each take() empties the counter).
      const seen: Record<string, number> = {};
      const tally = () => {
        for (const [op, n] of Object.entries(counter.take().requests)) seen[op] = (seen[op] ?? 0) + n;
        return seen.delete ?? 0;
      };
      await expect.poll(tally, { timeout: 30_000 }).toBeGreaterThanOrEqual(1);
      // other's permit only: our lease node went
      await expect.poll(async () => (await info()).holders.length, { timeout: 30_000 }).toBe(1);
      tally();
      expect(seen.delete, `our requests since the turn that was not ours: ${JSON.stringify(seen)}`).toBe(1);
      await first.release();
      const { granted: held, error } = await waiting;
      if (!held) throw error;
      expect((await info()).holders).toHaveLength(2);
      await held.release();
      await permit.release();
    } finally {
      await raw.close();
      await other.close();
    }
  });
  /**
   * A lock waiter queued behind a raw client's node (Curator's shape), up to the moment its watches
   * are set and answered: what it sent meanwhile, summed.
   */
  const queueBehind = async (key: string, raw: ZkClient) => {
    const head = await raw.create(
      `${provider.folder(key)}/_c_${crypto.randomUUID()}-lock-`,
      Buffer.alloc(0),
      OPEN_ACL_UNSAFE,
      CreateMode.EPHEMERAL_SEQUENTIAL,
    );
    counter.take();
    const waiting = provider.acquire(key, { waitMs: 20_000 });
    const sent: Record<string, number> = {};
    let [requests, replies] = [0, 0];
    // Its own node's, the marker's and the head's exists leave in one write (the code before this
    // design sent two): the waiter is watching once all it sent is answered.
    await expect
      .poll(
        () => {
          const counts = counter.take();
          for (const [op, n] of Object.entries(counts.requests)) sent[op] = (sent[op] ?? 0) + n;
          requests += Object.values(counts.requests).reduce((a, b) => a + b, 0);
          replies += counts.replies;
          return (sent.exists ?? 0) >= 2 && replies === requests;
        },
        { timeout: 10_000, interval: 20 },
      )
      .toBe(true);
    return { head, waiting };
  };

  it('a lock waiter next in line is granted on the head’s deletion, without listing the queue again', async () => {
    const key = uniqueKey('calls-next');
    await (await provider.acquire(key)).release(); // the session and the name's folder exist now
    const raw = await rawClient();
    try {
      const { head, waiting } = await queueBehind(key, raw);
      await raw.delete(head);
      const lock = await waiting;
      const { requests } = counter.take();
      await lock.release();
      console.log(`waiter next in line, after the head's deletion: ${JSON.stringify(requests)}`);
      // Curator lists the queue again here (getChildren2): a round trip between deletion and grant.
      expect(requests.getChildren ?? 0).toBe(0);
    } finally {
      await raw.close();
    }
  });

  // The waiter above trusts the marker's absence only while its watch on the marker is quiet: a
  // marker created after the waiter last listed the queue (a holder's grant with lockDelayMs, whose
  // session then expired) must still be waited out.
  it('a lock waiter next in line still waits out a lock-delay marker made after it listed', async () => {
    const key = uniqueKey('calls-next-delay');
    await (await provider.acquire(key)).release();
    const raw = await rawClient();
    try {
      const { head, waiting } = await queueBehind(key, raw);
      const delayMs = 1_500;
      const headName = head.slice(head.lastIndexOf('/') + 1);
      await raw.create(
        `${provider.folder(key)}/${MARKER_NAME}`,
        Buffer.from(`${headName} ${delayMs}`),
        OPEN_ACL_UNSAFE,
        CreateMode.PERSISTENT,
      );
      await raw.delete(head); // as its session's end would: no clean release
      await expectGrantedAfterDelay(waiting, performance.now(), delayMs);
    } finally {
      await raw.close();
    }
  });

  // Closing the session removes every node of it in one call: close() sends no delete per lock
  // (100,000 held locks left their nodes to the session timeout: the close queued behind them).
  it('close() with 50 locks held sends no delete, only the session close', async () => {
    const own = new ZooKeeperLockProvider({ connectString: counter.connectString, sessionTimeoutMs: 4_000 });
    const keys = Array.from({ length: 50 }, (_, i) => uniqueKey(`close-${i}`));
    await Promise.all(keys.map((key) => own.acquire(key)));
    counter.take();
    await own.close();
    const { requests } = counter.take();
    expect(requests.delete ?? 0).toBe(0);
    expect(requests['op -11']).toBeGreaterThanOrEqual(1); // closeSession (per session it opened)
    const raw = await rawClient();
    try {
      for (const key of keys.slice(0, 10)) {
        const nodes = await raw.getChildren(provider.folder(key)).catch(() => []);
        expect(nodes.filter((node) => node.includes('lock-'))).toEqual([]);
      }
    } finally {
      await raw.close();
    }
  });
});
