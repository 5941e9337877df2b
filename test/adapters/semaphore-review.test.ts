import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { BackendUnavailableError } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startAll, startServers } from '../servers/index.js';

/** Blocks the event loop, as a GC pause would: no timer fires meanwhile. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

/**
 * Safety review (MEDIUM, two findings) of session-backed semaphores:
 * 1. a permit read right after an event-loop stall past its session's deadline must not look held
 *    (locks check their session on the spot since 7434061; permits did not);
 * 2. ZooKeeper: a multi-permit create whose reply was lost while the connection stayed down must not
 *    leave its lease nodes behind for as long as the session lives.
 */
describe('semaphore review fixes', () => {
  let etcd: ServerGroup;
  let zk: ServerGroup;
  beforeAll(async () => {
    // tickTime 1 s: sessions of up to 20 s (finding 2 needs one that outlives the outage).
    [etcd, zk] = await startAll([
      startServers('etcd'),
      startServers('zookeeper', { faults: true, tickMs: 1_000 }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled([etcd?.stop(), zk?.stop()]);
  });

  it('ZooKeeper: a permit is not held once its session is past its deadline, timer or not', async () => {
    const provider = new ZooKeeperLockProvider({
      connectString: endpoint(zk, 'ZK_CONNECT'),
      sessionTimeoutMs: 2_000,
      serverTickMs: 1_000,
    });
    try {
      const sem = provider.semaphore(uniqueKey('sem-stall'), { limit: 2 });
      const permit = await sem.acquire();
      expect(permit.held).toBe(true);
      stall(5_000); // past the 2 s session: the server expires it meanwhile
      const seen = { held: permit.held, aborted: permit.signal.aborted };
      console.log(`ZooKeeper permit after a 5 s stall on a 2 s session: ${JSON.stringify(seen)}`);
      expect(seen).toEqual({ held: false, aborted: true });
      await permit.release().catch(() => undefined);
    } finally {
      await provider.close();
    }
  }, 30_000);

  it('etcd: a permit is not held once its lease is past its deadline, timer or not', async () => {
    const provider = new EtcdLockProvider({
      endpoints: endpoint(etcd, 'ETCD_ENDPOINTS').split(','),
      namespace: `${uniqueKey('sem-stall')}/`,
      sessionTtlMs: 1_000,
    });
    try {
      const sem = provider.semaphore('s', { limit: 2 });
      const permit = await sem.acquire();
      expect(permit.held).toBe(true);
      stall(2_500); // the 1 s lease runs out on the server meanwhile
      const seen = { held: permit.held, aborted: permit.signal.aborted };
      console.log(`etcd permit after a 2.5 s stall on a 1 s lease: ${JSON.stringify(seen)}`);
      expect(seen).toEqual({ held: false, aborted: true });
      await permit.release().catch(() => undefined);
    } finally {
      await provider.close();
    }
  }, 30_000);

  it('ZooKeeper: lease nodes of a multi whose reply was lost are removed once the connection is back', async () => {
    const [host = '', port = ''] = endpoint(zk, 'ZK_CONNECT').split(',')[0]?.split(':') ?? [];
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    const a = new ZooKeeperLockProvider({
      connectString: proxy.address,
      sessionTimeoutMs: 12_000,
      serverTickMs: 1_000,
      callTimeoutMs: 1_000,
    });
    const b = new ZooKeeperLockProvider({
      connectString: endpoint(zk, 'ZK_CONNECT'),
      sessionTimeoutMs: 12_000,
    });
    try {
      const name = uniqueKey('sem-lost-multi');
      const semA = a.semaphore(name, { limit: 3 });
      const semB = b.semaphore(name, { limit: 3 });
      await (await semA.acquire()).release(); // the folders exist, the session is open
      // The multi (its two '-lease-' creates) reaches the server; its reply is dropped, every
      // connection reset, and the connection stays down 2.5 s (longer than callTimeoutMs).
      let down = false;
      proxy.cutAfterRequest(
        (chunk) => chunk.includes('-lease-'),
        () => {
          down = true;
          proxy.setMode({ kind: 'blackhole' });
        },
      );
      const failed = await semA.tryAcquire({ permits: 2 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(down).toBe(true);
      expect(failed).toBeInstanceOf(BackendUnavailableError);
      // The multi was applied: its two permits are taken meanwhile.
      expect((await semB.inspect()).holders.map((h) => h.permits)).toEqual([2]);
      await new Promise((r) => setTimeout(r, 2_500 - 1_000));
      const healed = performance.now();
      proxy.setMode({ kind: 'pass' }); // resets the blackholed connections: A reconnects, same session
      // Before: the nodes stayed while A's session lived (B refused for its 12 s and beyond).
      await eventually(
        'the permits come back',
        async () => {
          const permit = await semB.tryAcquire({ permits: 2 });
          if (!permit) return false;
          await permit.release();
          return true;
        },
        6_000,
      );
      console.log(`permits back ${Math.round(performance.now() - healed)} ms after the connection came back`);
    } finally {
      await Promise.allSettled([a.close(), b.close()]);
      await proxy.close();
    }
  }, 40_000);
});
