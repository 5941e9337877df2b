import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const SESSION_TIMEOUT_MS = 2_000;

/** Each provider reaches ZooKeeper through its own fault proxies (one per server). */
function zkTarget(name: string, servers: () => ServerGroup) {
  const proxies = new Map<LockProvider, FaultProxy[]>();
  const providers: ZooKeeperLockProvider[] = [];
  afterAll(async () => {
    await Promise.all([...proxies.values()].flat().map((p) => p.close()));
  });
  return {
    name,
    ttlMs: SESSION_TIMEOUT_MS,
    holderDeathBoundMs: SESSION_TIMEOUT_MS + 2_000,
    fifo: true,
    queue: 'owners' as const,
    wakeups: () => providers.reduce((sum, p) => sum + p.wakeups, 0),
    createProvider: async () => {
      const chain = await Promise.all(
        endpoint(servers(), 'ZK_CONNECT')
          .split(',')
          .map((address) => {
            const [host = '', port = ''] = address.split(':');
            return FaultProxy.start({ host, port: Number(port) });
          }),
      );
      const provider = new ZooKeeperLockProvider({
        connectString: chain.map((p) => p.address).join(','),
        sessionTimeoutMs: SESSION_TIMEOUT_MS,
        serverTickMs: 200, // the test servers' tickTime
        callTimeoutMs: 1_000,
      });
      proxies.set(provider, chain);
      providers.push(provider);
      return provider;
    },
    lockDelay: true,
    faults: {
      crash: async (provider: LockProvider) => (provider as ZooKeeperLockProvider).abandon(),
      partition: async (provider: LockProvider, cut: boolean) => {
        for (const proxy of proxies.get(provider) ?? [])
          proxy.setMode(cut ? { kind: 'blackhole' } : { kind: 'pass' });
      },
    },
  };
}

describe('ZooKeeper standalone', () => {
  let zk: ServerGroup;
  beforeAll(async () => {
    zk = await startServers('zookeeper');
  });
  afterAll(() => zk?.stop());
  describeConformance(
    zkTarget('zookeeper standalone', () => zk),
    { describe, it, afterEach },
  );
});

describe('ZooKeeper 3-node ensemble', () => {
  let zk: ServerGroup;
  beforeAll(async () => {
    zk = await startServers('zookeeper', { size: 3 });
  }, 180_000); // the script, then the ensemble serving (each within 60 s; zk-quorum.ts)
  afterAll(() => zk?.stop());
  describeConformance(
    zkTarget('zookeeper ensemble', () => zk),
    { describe, it, afterEach },
  );
});
