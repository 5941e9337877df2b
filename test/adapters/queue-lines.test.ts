import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { namePrefix } from '../../adapters/etcd/keys.js';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { type ConnectedProvider, connect, type Lock, type QueuedWaiter } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { type EveryBackend, type NetworkBackend, startEveryBackend } from '../servers/index.js';

const WAIT = { waitMs: 30_000 };

/** Owner and requests of each entry: what a process's line looks like from one provider. */
const shape = (queue: QueuedWaiter[]) => queue.map(({ owner, requests }) => ({ owner, requests }));

// The providers of etcd, ZooKeeper, Redis and PostgreSQL line up their own requests of a name
// before one of them queues on the server: there queue() shows an entry per process's line, and
// only the process of a line knows how many requests it holds.
describe('queue(): entries per process line', () => {
  let servers: EveryBackend;
  const opened: ConnectedProvider[] = [];
  beforeAll(async () => {
    servers = await startEveryBackend();
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled(opened.map((provider) => provider.close()));
    await servers?.stop();
  });

  it.each(['redis', 'etcd', 'zookeeper', 'postgres'] as NetworkBackend[])(
    '%s: each provider sees its own line whole, and the others as one entry each',
    async (backend) => {
      const open = async () => {
        const provider = await connect(servers.urls[backend]);
        opened.push(provider);
        return provider;
      };
      const [a, b, c] = [await open(), await open(), await open()];
      const key = uniqueKey('queue-lines');
      const granted: Array<Promise<Lock>> = [];
      const ask = (provider: ConnectedProvider, owner: string) => {
        const grant = provider.acquire(key, { ...WAIT, owner });
        grant.catch(() => undefined); // a failed test closes the providers: no unhandled rejection
        granted.push(grant);
      };
      const held = await a.acquire(key, { owner: 'a-holder' });
      ask(b, 'b1');
      await eventually('b1 queued', async () => (await c.queue(key)).length === 1);
      ask(c, 'c1');
      await eventually('c1 queued', async () => (await a.queue(key)).length === 2);
      ask(b, 'b2'); // behind b1, in b's line
      await eventually('b2 in b’s line', async () => (await b.queue(key))[0]?.requests === 2);
      // a holds: on etcd and ZooKeeper a2 waits behind the holder in a's line; on Redis and
      // PostgreSQL a's turn ended at the grant, and a2 waits on the server.
      ask(a, 'a2');
      await eventually('a2 in a’s line', async () => (await a.queue(key)).length === 3);

      // PostgreSQL keeps no owner text for a waiting backend: only a provider's own entry has one.
      const named = (owner: string) => (backend === 'postgres' ? undefined : owner);
      // On Redis and PostgreSQL a2 waits on the server behind c1: another process's entry to b and c.
      const onServer = backend === 'redis' || backend === 'postgres';
      const a2 = onServer ? [{ owner: named('a2'), requests: undefined }] : [];
      expect(shape(await b.queue(key))).toEqual([
        { owner: 'b1', requests: 2 },
        { owner: named('c1'), requests: undefined },
        ...a2,
      ]);
      expect(shape(await c.queue(key))).toEqual([
        { owner: named('b1'), requests: undefined },
        { owner: 'c1', requests: 1 },
        ...a2,
      ]);
      expect(shape(await a.queue(key))).toEqual([
        { owner: named('b1'), requests: undefined },
        { owner: named('c1'), requests: undefined },
        // a's line queues only once its holder's turn ends, unless a2 waits there already.
        onServer ? { owner: 'a2', requests: 1 } : { owner: undefined, requests: 1 },
      ]);
      expect(await b.queue(key, { limit: 1 })).toHaveLength(1);

      await held.release();
      await Promise.all(granted.map(async (grant) => (await grant).release()));
      await eventually('nobody waits', async () => (await a.queue(key)).length === 0);
    },
    60_000,
  );

  it('Redis: a waiter whose stored spec is garbage shows with owner undefined', async () => {
    const provider = new RedisLockProvider({ url: servers.urls.redis });
    const raw = new Redis(servers.urls.redis);
    try {
      const other = await connect(servers.urls.redis);
      opened.push(other);
      const key = uniqueKey('queue-garbage');
      const held = await provider.acquire(key);
      const waiting = other.acquire(key, { ...WAIT, owner: 'b' });
      waiting.catch(() => undefined); // closed by afterAll if the test fails
      await eventually('b queued', async () => (await provider.queue(key)).length === 1);
      expect((await provider.queue(key))[0]?.owner).toBe('b');
      const [id] = await raw.zrange(provider.keys(key).queue, 0, 0);
      for (const garbage of ['garbage', '1000 999 x owner', '']) {
        await raw.hset(provider.keys(key).pending, id as string, garbage);
        expect(await provider.queue(key)).toMatchObject([{ owner: undefined, requests: undefined }]);
      }
      await raw.hdel(provider.keys(key).pending, id as string);
      expect((await provider.queue(key))[0]?.owner).toBeUndefined();
      await held.release();
      await (await waiting).release();
    } finally {
      raw.disconnect();
      await provider.close();
    }
  });

  it('etcd: a key under the name whose value is malformed shows with owner and since undefined', async () => {
    const provider = await connect(servers.urls.etcd);
    opened.push(provider);
    const hosts = servers.urls.etcd
      .replace('etcd://', '')
      .split(',')
      .map((host) => `http://${host}`);
    const raw = new Etcd3({ hosts });
    try {
      const key = uniqueKey('queue-garbage');
      const held = await provider.acquire(key);
      const stray = `${namePrefix('', key)}stray`;
      await raw.put(stray).value('{"fencekit":1,"owner":7,"since":"not a date"}');
      expect(await provider.queue(key)).toEqual([
        { owner: undefined, since: undefined, requests: undefined },
      ]);
      await raw.put(stray).value(Buffer.from([0xff, 0xfe, 0x00]));
      expect(await provider.queue(key)).toHaveLength(1); // read as owner text, never a throw
      await raw.delete().key(stray);
      await held.release();
    } finally {
      raw.close();
    }
  });
});
