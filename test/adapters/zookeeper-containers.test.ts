import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider, type ZooKeeperProviderOptions } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { eventually } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

/**
 * The folders of lock, semaphore and election nodes are container nodes: the server removes them
 * once empty, whoever emptied them and whether or not anyone releases there again. The server here
 * checks its containers every 100 ms; the providers' own linger deletion is pushed out of the way
 * (an hour), so only the server can remove a folder in these tests.
 */
describe('ZooKeeper folders are containers the server removes once empty', () => {
  let zk: ServerGroup;
  let connectString: string;
  let raw: ZkClient;
  const providers: ZooKeeperLockProvider[] = [];
  const open = (options: Partial<ZooKeeperProviderOptions> = {}) => {
    const provider = new ZooKeeperLockProvider({
      connectString,
      sessionTimeoutMs: 2_000,
      serverTickMs: 200, // the test server's tickTime
      folderLingerMs: 3_600_000,
      ...options,
    });
    providers.push(provider);
    return provider;
  };
  /** A root of its own, so that every level of it is made by the test's first grant. */
  const freshRoot = () => `/containers-${crypto.randomUUID()}/locks`;
  const topOf = (root: string) => root.split('/').slice(0, 2).join('/');
  const gone = (path: string) => async () => (await raw.exists(path)) === null;
  // Each level goes at its own check, after the one below it: a few intervals, with room to spare.
  const BOUND_MS = 20_000;

  beforeAll(async () => {
    zk = await startServers('zookeeper', { containerCheckMs: 100 });
    connectString = endpoint(zk, 'ZK_CONNECT');
    raw = await ZkClient.connect(
      { connectString, sessionTimeoutMs: 4_000, callTimeoutMs: 5_000 },
      { timeoutMs: 10_000 },
    );
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await raw?.close();
    await zk?.stop();
  });

  // A container's Stat looks like a persistent node's (ephemeralOwner 0): what tells them apart is
  // that the server removes it.
  it('a lock makes its folder and the ancestors it needs as containers; all go after the release', async () => {
    const root = freshRoot();
    const provider = open({ root });
    const lock = await provider.acquire('orders/42');
    await lock.release();
    await eventually('the server removes every level once empty', gone(topOf(root)), BOUND_MS);
  });

  it('a creator-only folder goes too: the server needs no permission to remove a container', async () => {
    const root = freshRoot();
    const provider = open({ root, digest: 'alice:secret', creatorOnlyAcl: true });
    await (await provider.acquire('private')).release();
    await eventually('the server removes the folders', gone(topOf(root)), BOUND_MS);
  });

  it('a holder that dies leaves no folder: its node expires with its session, then the folders go', async () => {
    const root = freshRoot();
    const holder = open({ root });
    const other = open({ root });
    await holder.acquire('crash');
    expect(await other.tryAcquire('crash')).toBeNull(); // a request that gave up: it deletes nothing
    await holder.abandon(); // as a killed process: no release, no close
    await eventually('the session expires and the server removes the folders', gone(topOf(root)), BOUND_MS);
  });

  it("a semaphore's locks, leases and name folders go after the last permit is returned", async () => {
    const root = freshRoot();
    const provider = open({ root });
    const sem = provider.semaphore('pool', { limit: 3 });
    const one = await sem.acquire();
    const two = await sem.acquire({ permits: 2 }); // lease nodes made by one multi
    await one.release();
    await two.release();
    await eventually('the server removes the semaphore folders', gone(topOf(root)), BOUND_MS);
  });

  it("an election's folder goes after its last candidate resigns", async () => {
    const root = freshRoot();
    const provider = open({ root });
    const leader = await provider.election('primary').campaign('a');
    await leader.resign();
    await eventually('the server removes the election folder', gone(topOf(root)), BOUND_MS);
  });

  it('rounds on one name from two providers while its folder keeps going: every acquire succeeds, tokens rise', async () => {
    const root = freshRoot();
    // Both deleters at once: the server's container check and the providers' linger deletion at
    // every release, each racing the other provider's "make the folder, then create in it".
    const [a, b] = [open({ root, folderLingerMs: 0 }), open({ root, folderLingerMs: 0 })];
    const tokens: bigint[] = [];
    const rounds = async (provider: ZooKeeperLockProvider) => {
      for (let i = 0; i < 100; i++) {
        const lock = await provider.acquire('churn', { waitMs: 20_000 });
        tokens.push(lock.fencingToken); // grants are one at a time: pushed in grant order
        await lock.release();
        // Now and then the folder stays empty past a container check.
        if (i % 10 === 9) await new Promise((r) => setTimeout(r, 150));
      }
    };
    await Promise.all([rounds(a), rounds(b)]);
    expect(tokens).toHaveLength(200);
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i] as bigint).toBeGreaterThan(tokens[i - 1] as bigint);
    await eventually('the server removes the folders', gone(topOf(root)), BOUND_MS);
  }, 120_000);
});
