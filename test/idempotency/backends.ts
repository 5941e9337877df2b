import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { etcdClient } from '../../adapters/etcd/client.js';
import { EtcdRecords } from '../../src/idempotency/etcd-records.js';
import { MemoryRecords } from '../../src/idempotency/memory-records.js';
import type { StoredOutcome } from '../../src/idempotency/outcome.js';
import { PostgresRecords } from '../../src/idempotency/postgres-records.js';
import type { BeginResult, CompleteResult, RecordBackend } from '../../src/idempotency/records.js';
import { RedisRecords } from '../../src/idempotency/redis-records.js';
import { endpoint, type ServerGroup, startAll, startServers } from '../servers/index.js';

export type StoreBackend = 'memory' | 'redis' | 'postgres' | 'etcd';

/** Throwaway Redis, PostgreSQL and etcd servers for one test file, and the store URL of each backend. */
export async function startStoreServers(): Promise<{
  urls: Record<StoreBackend, string>;
  stop(): Promise<void>;
}> {
  const [redis, postgres, etcd] = await startAll([
    startServers('redis'),
    startServers('postgres'),
    startServers('etcd'),
  ]);
  const groups: ServerGroup[] = [redis, postgres, etcd];
  return {
    urls: {
      memory: `memory://idem-${crypto.randomUUID()}`,
      redis: endpoint(redis, 'REDIS_URL'),
      postgres: endpoint(postgres, 'PG_URL'),
      etcd: `etcd://${endpoint(etcd, 'ETCD_ENDPOINTS').replace(/http:\/\//g, '')}`,
    },
    stop: async () => {
      await Promise.all(groups.map((g) => g.stop()));
    },
  };
}

/** Starts the servers before this file's tests and stops them after all of them: `servers.urls`. */
export function useStoreServers(): { readonly urls: Record<StoreBackend, string> } {
  let servers: Awaited<ReturnType<typeof startStoreServers>> | undefined;
  beforeAll(async () => {
    servers = await startStoreServers();
  });
  afterAll(async () => {
    await servers?.stop();
  });
  return {
    get urls() {
      if (!servers) throw new Error('the store servers are not started (use urls inside a test)');
      return servers.urls;
    },
  };
}

/**
 * The store's record backend opened directly, to play a process that began a run and then stalled.
 * `table` and `prefix` are the store options of the same names.
 */
export function rawRecords(
  backend: StoreBackend,
  url: string,
  place: { table?: string; prefix?: string } = {},
): RecordBackend {
  switch (backend) {
    case 'memory':
      return new MemoryRecords(url.replace('memory://', ''));
    case 'redis':
      return new RedisRecords(new Redis(url, { lazyConnect: true }), { prefix: place.prefix });
    case 'postgres':
      return new PostgresRecords(new pg.Pool({ connectionString: url, max: 2 }), place.table);
    case 'etcd':
      return new EtcdRecords(etcdClient({ endpoints: etcdEndpoints(url) }), {
        prefix: place.prefix ?? 'fencekit/idem/',
        callTimeoutMs: 5_000,
        refused: (error) => error,
      });
  }
}

/** The http:// endpoints of an `etcd://host:port[,host:port…]` store URL. */
export function etcdEndpoints(url: string): string[] {
  return url
    .replace(/^etcd:\/\//, '')
    .split(',')
    .map((host) => `http://${host}`);
}

/** records.begin() with the request's fields in order: key, payload hash, lease, retention, attempt. */
export function beginRun(
  records: RecordBackend,
  ...[key, hash, leaseMs, retentionMs, attempt]: [string, string, number, number, string]
): Promise<BeginResult> {
  return records.begin({ key, hash, leaseMs, retentionMs, attempt });
}

/** records.complete() with the request's fields in order: key, token, outcome, retention. */
export function completeRun(
  records: RecordBackend,
  ...[key, token, outcome, retentionMs]: [string, bigint, StoredOutcome, number]
): Promise<CompleteResult> {
  return records.complete({ key, token, outcome, retentionMs });
}
