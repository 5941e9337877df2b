import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startAll, startServers } from '../servers/index.js';

/** Blocks the event loop, as a GC pause would: no timer fires meanwhile. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

/**
 * A session-backed grant whose answer is handled after the session's deadline — the event loop
 * stalled between the reply and fencekit's handling of it, before the session's timer could fire —
 * must not be handed out as held: the session is checked on the spot, the lost grant released,
 * and the wait goes on with a new session. Before: acquire resolved held, signal live, while the
 * server had already expired the session (another client could hold the name).
 */
describe('no session-backed grant is born lost', () => {
  let etcd: ServerGroup;
  let zk: ServerGroup;
  beforeAll(async () => {
    [etcd, zk] = await startAll([startServers('etcd'), startServers('zookeeper')]);
  });
  afterAll(async () => {
    await Promise.allSettled([etcd?.stop(), zk?.stop()]);
  });

  it('etcd: an enqueue answer handled after the session deadline is not a grant', async () => {
    const provider = new EtcdLockProvider({
      endpoints: endpoint(etcd, 'ETCD_ENDPOINTS').split(','),
      namespace: `${uniqueKey('born-lost')}/`,
      sessionTtlMs: 1_000,
    });
    try {
      await (await provider.acquire('warm')).release();
      const kv = provider.client.kv as unknown as { txn: (...args: unknown[]) => Promise<unknown> };
      const txn = kv.txn.bind(kv);
      let stallNext = true;
      kv.txn = async (...args: unknown[]) => {
        const answer = await txn(...args);
        if (stallNext) {
          stallNext = false;
          stall(2_500); // the 1 s lease runs out on the server meanwhile
        }
        return answer;
      };
      const lock = await provider.acquire('k', { waitMs: 10_000 });
      expect(lock.held).toBe(true);
      expect(lock.signal.aborted).toBe(false);
      // The grant really exists on the server (before: the expired session's key was gone).
      expect((await provider.inspect('k'))?.holder?.fencingToken).toBe(lock.fencingToken);
      await lock.release();
    } finally {
      await provider.close();
    }
  });

  it('ZooKeeper: a queue listing handled after the session deadline is not a grant', async () => {
    const provider = new ZooKeeperLockProvider({
      connectString: endpoint(zk, 'ZK_CONNECT'),
      sessionTimeoutMs: 2_000,
      serverTickMs: 200,
    });
    try {
      await (await provider.acquire('warm')).release();
      const session = await (
        provider as unknown as {
          election(name: string): { host: { session(): Promise<{ client: unknown }> } };
        }
      )
        .election('x')
        .host.session();
      const client = session.client as { getChildren: (...args: unknown[]) => Promise<unknown> };
      const getChildren = client.getChildren.bind(client);
      let stallNext = true;
      client.getChildren = async (...args: unknown[]) => {
        const answer = await getChildren(...args);
        if (stallNext) {
          stallNext = false;
          stall(5_000); // past the 2 s session: the server expires it meanwhile
        }
        return answer;
      };
      const key = uniqueKey('born-lost');
      const lock = await provider.acquire(key, { waitMs: 20_000 });
      expect(lock.held).toBe(true);
      expect(lock.signal.aborted).toBe(false);
      expect((await provider.inspect(key))?.holder?.fencingToken).toBe(lock.fencingToken);
      await lock.release();
    } finally {
      await provider.close();
    }
  }, 60_000);
});
