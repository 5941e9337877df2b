import type { MeterProvider } from '@opentelemetry/api';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { advisoryKey } from '../../adapters/postgres/index.js';
import { RedisLockProvider, RedlockProvider } from '../../adapters/redis/index.js';
import { lockKeys } from '../../adapters/redis/scripts.js';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import {
  type LockLostError,
  type LockProvider,
  METRIC_NAMES,
  type ProviderEventMap,
} from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';
import { postgresFixture } from '../servers/postgres-fixture.js';
import { testMetrics } from './metric-reader.js';

/** Event names in the order the provider emitted them. */
function recordEvents(provider: LockProvider): Array<keyof ProviderEventMap> {
  const seen: Array<keyof ProviderEventMap> = [];
  for (const event of ['grant', 'loss', 'renew-failed', 'release'] as const) {
    provider.on?.(event, () => seen.push(event));
  }
  return seen;
}

/** A grant and a release, counted and announced, with the backend's name on every point. */
async function expectGrantAndRelease(
  provider: LockProvider,
  backend: string,
  collect: ReturnType<typeof testMetrics>['collect'],
): Promise<void> {
  const events = recordEvents(provider);
  const lock = await provider.acquire(uniqueKey('telemetry'), { owner: 'metrics-test' });
  let snap = await collect();
  expect(snap.total(METRIC_NAMES.held, { backend, kind: 'lock' })).toBe(1);
  expect(snap.total(METRIC_NAMES.waitDuration, { backend, outcome: 'granted' })).toBe(1);
  await lock.release();
  snap = await collect();
  expect(snap.total(METRIC_NAMES.held, { backend })).toBe(0);
  expect(snap.total(METRIC_NAMES.losses, { backend, reason: 'released' })).toBe(1);
  expect(snap.total(METRIC_NAMES.holdDuration, { backend, reason: 'released' })).toBe(1);
  expect(events).toEqual(['grant', 'release']);
}

/** The session backends: a provider through a fault proxy, whose session's renewals can be cut off. */
const sessionBackends = [
  {
    backend: 'etcd' as const,
    renewal: 'keepalive',
    target: (group: ServerGroup) => {
      const { hostname, port } = new URL(endpoint(group, 'ETCD_ENDPOINTS').split(',')[0] as string);
      return { host: hostname, port: Number(port) };
    },
    open: (address: string, meterProvider: MeterProvider) =>
      new EtcdLockProvider({
        endpoints: [`http://${address}`],
        sessionTtlMs: 2_000,
        callTimeoutMs: 1_000,
        meterProvider,
      }),
  },
  {
    backend: 'zookeeper' as const,
    renewal: 'heartbeat',
    target: (group: ServerGroup) => {
      const [host, port] = (endpoint(group, 'ZK_CONNECT').split(',')[0] as string).split(':');
      return { host: host as string, port: Number(port) };
    },
    open: (address: string, meterProvider: MeterProvider) =>
      new ZooKeeperLockProvider({
        connectString: address,
        sessionTimeoutMs: 2_000,
        serverTickMs: 200,
        callTimeoutMs: 1_000,
        meterProvider,
      }),
  },
];

describe.each(sessionBackends)('telemetry on $backend', ({ backend, renewal, target, open }) => {
  let group: ServerGroup;
  let proxy: FaultProxy;
  let provider: LockProvider;
  const { meterProvider, collect } = testMetrics();
  beforeAll(async () => {
    group = await startServers(backend);
    proxy = await FaultProxy.start(target(group));
    provider = open(proxy.address, meterProvider);
  });
  afterAll(async () => {
    proxy?.setMode({ kind: 'pass' });
    await provider?.close();
    await proxy?.close();
    await group?.stop();
  });

  it('counts a grant and a release', async () => {
    await expectGrantAndRelease(provider, backend, collect);
  });

  it(`session ${renewal}s are renewals; cut off, they fail (renew-failed) and the lock is lost`, async () => {
    const events = recordEvents(provider);
    const lock = await provider.acquire(uniqueKey('telemetry-loss'));
    await eventually(
      `a ${renewal} counted`,
      async () => (await collect()).total(METRIC_NAMES.renewals, { kind: 'session', outcome: 'renewed' }) > 0,
      // One keepalive is due every TTL/3 (667 ms); a loaded machine may starve a few.
      20_000,
    );
    proxy.setMode({ kind: 'blackhole' });
    await eventually('lock lost', async () => lock.signal.aborted, 20_000);
    proxy.setMode({ kind: 'pass' });
    const reason = (lock.signal.reason as LockLostError).reason;
    const snap = await collect();
    expect(snap.total(METRIC_NAMES.losses, { backend, reason })).toBe(1);
    expect(snap.total(METRIC_NAMES.renewals, { kind: 'session', outcome: 'failed' })).toBeGreaterThan(0);
    expect(events[0]).toBe('grant');
    expect(events).toContain('renew-failed');
    expect(events.at(-1)).toBe('loss');
    await lock.release();
  });
});

describe('telemetry on Redis', () => {
  let server: ServerGroup;
  let raw: Redis;
  let provider: RedisLockProvider;
  const { meterProvider, collect } = testMetrics();
  beforeAll(async () => {
    server = await startServers('redis');
    const url = endpoint(server, 'REDIS_URL');
    raw = new Redis(url);
    provider = new RedisLockProvider({ url, meterProvider });
  });
  afterAll(async () => {
    await provider?.close();
    raw?.disconnect();
    await server?.stop();
  });

  it('counts a grant and a release', async () => {
    await expectGrantAndRelease(provider, 'redis', collect);
  });

  it('a lock deleted behind its back: the renewal is rejected and the loss counted as "expired"', async () => {
    const events = recordEvents(provider);
    const key = uniqueKey('telemetry-loss');
    const lock = await provider.acquire(key, { ttlMs: 600 });
    expect(await raw.del(lockKeys('fencekit:', key).lock)).toBe(1);
    await eventually('lock lost', async () => lock.signal.aborted, 5_000);
    const snap = await collect();
    expect((lock.signal.reason as LockLostError).reason).toBe('expired');
    expect(snap.total(METRIC_NAMES.renewals, { backend: 'redis', kind: 'lock', outcome: 'rejected' })).toBe(
      1,
    );
    expect(snap.total(METRIC_NAMES.losses, { backend: 'redis', reason: 'expired' })).toBe(1);
    expect(events).toEqual(['grant', 'loss']);
    await lock.release();
  });
});

describe('telemetry on Redlock', () => {
  let redis: ServerGroup;
  let provider: RedlockProvider;
  const { meterProvider, collect } = testMetrics();
  beforeAll(async () => {
    redis = await startServers('redis', { size: 3, faults: true });
    const hosts = endpoint(redis, 'REDIS_HOSTS').split(',');
    provider = new RedlockProvider({ instances: hosts.map((h) => `redis://${h}`), meterProvider });
  });
  afterAll(async () => {
    await provider?.close();
    await redis?.stop();
  });

  it('counts a grant, its renewals and its release', async () => {
    await expectGrantAndRelease(provider, 'redlock', collect);
    // A lease long enough that a slow machine still renews it in time (a 300 ms one was lost
    // before its first renewal under load), and a patient wait for that renewal.
    const lock = await provider.acquire(uniqueKey('telemetry-renew'), { ttlMs: 3_000 });
    await eventually(
      'a renewal counted',
      async () =>
        (await collect()).total(METRIC_NAMES.renewals, { backend: 'redlock', outcome: 'renewed' }) > 0,
      20_000,
    );
    await lock.release();
  });
});

describe('telemetry on PostgreSQL', () => {
  const server = postgresFixture();
  const { meterProvider, collect } = testMetrics();

  it('counts a grant and a release', async () => {
    await expectGrantAndRelease(server.open({ meterProvider }), 'postgres', collect);
  });

  it('the holding connection terminated: a loss "connection-lost" is counted and announced', async () => {
    const provider = server.open({ meterProvider });
    const events = recordEvents(provider);
    const key = uniqueKey('telemetry-loss');
    const lock = await provider.acquire(key);
    const id = BigInt.asUintN(64, advisoryKey(key));
    const killed = await server.admin.query(
      `SELECT pg_terminate_backend(pid) FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid::bigint = $1 AND objid::bigint = $2`,
      [Number(id >> 32n), Number(id & 0xffffffffn)],
    );
    expect(killed.rowCount).toBe(1);
    await eventually('lock lost', async () => lock.signal.aborted, 5_000);
    const snap = await collect();
    expect(snap.total(METRIC_NAMES.losses, { backend: 'postgres', reason: 'connection-lost' })).toBe(1);
    expect(events).toEqual(['grant', 'loss']);
    await lock.release();
  });
});
