import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const SESSION_TTL_MS = 2_000;

/**
 * Each provider reaches etcd through its own fault proxies (one per member), so a test can cut one
 * client off (blackhole: no RST, requests just stop being answered) while the others go on.
 */
function etcdTarget(name: string, servers: () => ServerGroup) {
  const proxies = new Map<LockProvider, FaultProxy[]>();
  const providers: EtcdLockProvider[] = [];
  afterAll(async () => {
    await Promise.all([...proxies.values()].flat().map((p) => p.close()));
  });
  return {
    name,
    ttlMs: SESSION_TTL_MS,
    holderDeathBoundMs: SESSION_TTL_MS + 2_000,
    fifo: true,
    queue: 'owners' as const,
    wakeups: () => providers.reduce((sum, p) => sum + p.wakeups, 0),
    createProvider: async () => {
      const endpoints = endpoint(servers(), 'ETCD_ENDPOINTS').split(',');
      const chain = await Promise.all(
        endpoints.map((url) => {
          const { hostname, port } = new URL(url);
          return FaultProxy.start({ host: hostname, port: Number(port) });
        }),
      );
      const provider = new EtcdLockProvider({
        endpoints: chain.map((p) => `http://${p.address}`),
        sessionTtlMs: SESSION_TTL_MS,
        callTimeoutMs: 1_000,
      });
      proxies.set(provider, chain);
      providers.push(provider);
      return provider;
    },
    lockDelay: true,
    faults: {
      crash: async (provider: LockProvider) => (provider as EtcdLockProvider).abandon(),
      partition: async (provider: LockProvider, cut: boolean) => {
        for (const proxy of proxies.get(provider) ?? [])
          proxy.setMode(cut ? { kind: 'blackhole' } : { kind: 'pass' });
      },
    },
  };
}

describe('etcd single node', () => {
  let etcd: ServerGroup;
  beforeAll(async () => {
    etcd = await startServers('etcd');
  });
  afterAll(() => etcd?.stop());
  describeConformance(
    etcdTarget('etcd single node', () => etcd),
    { describe, it, afterEach },
  );
});

describe('etcd 3-member cluster', () => {
  let etcd: ServerGroup;
  beforeAll(async () => {
    etcd = await startServers('etcd', { size: 3 });
  });
  afterAll(() => etcd?.stop());
  describeConformance(
    etcdTarget('etcd 3-member cluster', () => etcd),
    { describe, it, afterEach },
  );
});
