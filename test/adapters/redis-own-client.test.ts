import { Redis } from 'ioredis';
import { createClient as createClient5 } from 'redis';
import { createClient as createClient6 } from 'redis6';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider, RedlockProvider } from '../../adapters/redis/index.js';
import type { NodeRedisClient } from '../../adapters/redis/node-redis.js';
import { BackendUnavailableError } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startAll, startServers } from '../servers/index.js';

// Bring your own client: the app's ioredis or node-redis connection drives the provider (its TLS,
// Sentinel, auth settings are then the app's), and close() leaves that connection open.
type Client = {
  name: string;
  open: (url: string) => Promise<NodeRedisClient | Redis>;
  ping: (c: never) => Promise<unknown>;
};

const clients: Client[] = [
  { name: 'ioredis', open: async (url) => new Redis(url), ping: (c: Redis) => c.ping() },
  {
    name: 'node-redis v5',
    open: async (url) => (await createClient5({ url }).connect()) as unknown as NodeRedisClient,
    ping: (c: { ping(): Promise<string> }) => c.ping(),
  },
  {
    name: 'node-redis v6',
    open: async (url) => (await createClient6({ url }).connect()) as unknown as NodeRedisClient,
    ping: (c: { ping(): Promise<string> }) => c.ping(),
  },
];

describe('a Redis client of the app’s own', () => {
  let single: ServerGroup;
  let three: ServerGroup;
  let url: string;
  let hosts: string[];
  const opened: Array<NodeRedisClient | Redis> = [];
  const open = async (client: Client, at: string) => {
    const c = await client.open(at);
    opened.push(c);
    return c;
  };
  beforeAll(async () => {
    [single, three] = await startAll([startServers('redis'), startServers('redis', { size: 3 })]);
    url = endpoint(single, 'REDIS_URL');
    hosts = endpoint(three, 'REDIS_HOSTS').split(',');
  });
  afterAll(async () => {
    for (const c of opened) {
      if (c instanceof Redis) c.disconnect();
      else c.destroy?.();
    }
    await Promise.all([single?.stop(), three?.stop()]);
  });

  it.each(clients)(
    'RedisLockProvider over $name: grants, hands over by notice, and leaves the client open',
    async (client) => {
      const mine = await open(client, url);
      const a = new RedisLockProvider({ client: mine, callTimeoutMs: 2_000 });
      const b = new RedisLockProvider({ url, callTimeoutMs: 2_000 });
      try {
        const key = uniqueKey('own-client');
        const first = await a.acquire(key, { ttlMs: 5_000, owner: client.name });
        expect(await b.tryAcquire(key)).toBeNull();
        expect((await b.inspect(key))?.holder).toMatchObject({
          owner: client.name,
          fencingToken: first.fencingToken,
        });
        await first.release();
        const held = await b.acquire(key, { ttlMs: 5_000 });
        expect(held.fencingToken).toBeGreaterThan(first.fencingToken);
        // a waits, and hears b's release on its own client's duplicate (the notice subscriber).
        const waiting = a.acquire(key, { ttlMs: 5_000, waitMs: 5_000 });
        // Queued, and listening, before the release: a release before a's subscription makes a first
        // without a notice (its next try, at once, takes the name), a slow first try finds it free.
        await eventually('a queued', async () => (await b.inspect(key))?.waiters === 1);
        const listening = async () =>
          ((await b.redis.pubsub('CHANNELS', '*inbox:*')) as string[]).length === 1;
        await eventually('a subscribed to its notices', listening);
        await held.release();
        const second = await waiting;
        expect(second.fencingToken).toBeGreaterThan(held.fencingToken);
        expect(a.wakeups).toBe(1);
        await second.release();
        expect(await a.inspect(key)).toBeNull();
        // A read-write lock through the same client: a's queued writer is handed the name.
        const name = uniqueKey('own-client-rw');
        const read = await b.readWriteLock(name).acquireRead({ ttlMs: 5_000 });
        const writing = a.readWriteLock(name).acquireWrite({ ttlMs: 5_000, waitMs: 5_000 });
        await eventually('a queued', async () => (await b.readWriteLock(name).inspect()).waiters === 1);
        await read.release();
        const write = await writing;
        expect(write.fencingToken).toBeGreaterThan(read.fencingToken);
        await write.release();
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
      expect(await client.ping(mine as never)).toBe('PONG');
    },
  );

  it.each(clients)(
    'RedlockProvider over three $name clients, closed without closing them',
    async (client) => {
      const mine = await Promise.all(hosts.map((h) => open(client, `redis://${h}`)));
      const provider = new RedlockProvider({ instances: mine });
      const other = new RedlockProvider({ instances: hosts.map((h) => `redis://${h}`) });
      try {
        const key = uniqueKey('own-redlock');
        const first = await provider.acquire(key, { ttlMs: 5_000 });
        expect(await other.tryAcquire(key)).toBeNull();
        const waiting = other.acquire(key, { waitMs: 5_000 });
        await first.release();
        const second = await waiting;
        expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
        await second.release();
      } finally {
        await Promise.all([provider.close(), other.close()]);
      }
      for (const c of mine) expect(await client.ping(c as never)).toBe('PONG');
    },
  );

  // Through the node-redis shim, an unreachable Redis must still fail calls within callTimeoutMs,
  // tell the holder before its lease can pass on, and leave close() bounded.
  it.each(clients.filter((c) => c.name !== 'ioredis'))(
    'RedisLockProvider over $name through a partition: bounded failures, the holder told, close() bounded',
    async (client) => {
      const [host, port] = new URL(url).host.split(':');
      const proxy = await FaultProxy.start({ host: host as string, port: Number(port) });
      try {
        const mine = await open(client, `redis://${proxy.address}`);
        const provider = new RedisLockProvider({ client: mine, callTimeoutMs: 300 });
        const lock = await provider.acquire(uniqueKey('own-partition'), { ttlMs: 1_500 });
        proxy.setMode({ kind: 'partition' });
        const started = performance.now();
        const error = await provider
          .acquire(uniqueKey('own-partition'), { waitMs: 1_000 })
          .catch((e: unknown) => e);
        const failedAfterMs = performance.now() - started;
        await eventually('the holder is told', async () => lock.signal.aborted, 3_000);
        const closing = performance.now();
        await provider.close();
        const closedAfterMs = performance.now() - closing;
        expect({
          error: (error as Error).constructor.name,
          failedInTime: failedAfterMs < 1_000 + 300 + 500,
          closedInTime: closedAfterMs < 300 + 1_000,
        }).toEqual({ error: BackendUnavailableError.name, failedInTime: true, closedInTime: true });
      } finally {
        proxy.setMode({ kind: 'pass' });
        await proxy.close();
      }
    },
  );
});
