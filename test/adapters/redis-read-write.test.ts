import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { readWriteKeys } from '../../adapters/redis/read-write-scripts.js';
import type { Lock, LockLostError, ReadWriteLock } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';
import { RestartableRedis } from '../servers/redis-restartable.js';

type Options = Partial<ConstructorParameters<typeof RedisLockProvider>[0]>;

/** When a grant's signal aborted (performance.now()), NaN until it does. */
function abortTime(lock: Lock): () => number {
  let at = Number.NaN;
  if (lock.signal.aborted) at = performance.now();
  else lock.signal.addEventListener('abort', () => (at = performance.now()), { once: true });
  return () => at;
}

/** Resolves with the grant and the time it came (performance.now()). */
async function timed(acquiring: Promise<Lock>): Promise<{ lock: Lock; at: number }> {
  const lock = await acquiring;
  return { lock, at: performance.now() };
}

/** Read-write locks on one Redis: what the shared suite cannot see (the server's keys, faults). */
describe('Redis read-write locks', () => {
  let server: ServerGroup;
  let url: string;
  let target: { host: string; port: number };
  let raw: Redis;
  const cleanUp: Array<() => Promise<unknown>> = [];
  const open = (options: Options = {}) => {
    const provider = new RedisLockProvider({ url, callTimeoutMs: 500, ...options });
    cleanUp.push(() => provider.close());
    return provider;
  };
  const behindProxy = async (options: Options = {}) => {
    const proxy = await FaultProxy.start(target);
    cleanUp.push(() => proxy.close());
    return { proxy, provider: open({ ...options, url: `redis://${proxy.address}` }) };
  };
  beforeAll(async () => {
    server = await startServers('redis');
    url = endpoint(server, 'REDIS_URL');
    const [host = '', port = ''] = endpoint(server, 'REDIS_HOSTS').split(',')[0]?.split(':') ?? [];
    target = { host, port: Number(port) };
    raw = new Redis(url);
  });
  afterEach(async () => {
    // Every step runs; a provider's close() that fails (it must not) fails the test afterwards.
    const failed: unknown[] = [];
    for (const step of cleanUp.splice(0).reverse())
      await step().catch((error: unknown) => failed.push(error));
    expect(failed).toEqual([]);
  });
  afterAll(async () => {
    raw?.disconnect();
    await server?.stop();
  });

  it('a writer paused past its lease (no renewals) loses its signal before the waiting readers are granted', async () => {
    const name = uniqueKey('rw-paused-writer');
    const { proxy, provider: holder } = await behindProxy();
    const [b, c] = [open(), open()];
    const write = await holder.readWriteLock(name).acquireWrite({ ttlMs: 1_500 });
    const aborted = abortTime(write);
    const readers = [b, c].map((p) =>
      timed(p.readWriteLock(name).acquireRead({ ttlMs: 5_000, waitMs: 15_000 })),
    );
    await eventually(
      'both readers queued',
      async () => (await b.readWriteLock(name).inspect()).waiters === 2,
    );
    // Held, not dropped: the renewals arrive after the heal, too late to count.
    proxy.setMode({ kind: 'partition' });
    try {
      const granted = await Promise.all(readers);
      for (const { lock, at } of granted) {
        expect(write.signal.aborted, 'the writer was told before a reader was granted').toBe(true);
        expect(aborted()).toBeLessThan(at);
        expect(lock.fencingToken).toBeGreaterThan(write.fencingToken);
      }
      expect((write.signal.reason as LockLostError).reason).toBe('unconfirmed');
      proxy.setMode({ kind: 'pass' });
      await write.release(); // late and stale: guarded by its ownerToken, it removes nothing
      expect((await b.readWriteLock(name).inspect()).readers).toHaveLength(2);
      await Promise.all(granted.map(({ lock }) => lock.release()));
    } finally {
      proxy.setMode({ kind: 'pass' });
    }
  });

  it('a crashed reader’s grant ends within its TTL, and the waiting writer gets the name', async () => {
    const name = uniqueKey('rw-crash');
    const [dead, w] = [open(), open({ maxPollMs: 200 })];
    const read = await dead.readWriteLock(name).acquireRead({ ttlMs: 800 });
    const writing = w.readWriteLock(name).acquireWrite({ ttlMs: 5_000, waitMs: 10_000 });
    await eventually('the writer queued', async () => (await w.readWriteLock(name).inspect()).waiters === 1);
    await dead.abandon();
    const write = await writing;
    expect(write.fencingToken).toBeGreaterThan(read.fencingToken);
    await write.release();
  });

  it('a waiter that misses its notice still takes the grant the release made for it, on its next poll', async () => {
    const name = uniqueKey('rw-missed-notice');
    const holder = open();
    // The waiter hears notices through a proxy of their own, which drops them once it is subscribed.
    const notices = await FaultProxy.start(target);
    cleanUp.push(() => notices.close());
    const deaf = open({ maxPollMs: 200, subscriber: { host: '127.0.0.1', port: notices.port } });
    const read = await holder.readWriteLock(name).acquireRead({ ttlMs: 60_000 });
    const writing = deaf.readWriteLock(name).acquireWrite({ ttlMs: 5_000, waitMs: 10_000, owner: 'deaf' });
    await eventually('the writer queued and subscribed', async () => {
      const spec = Object.values(await raw.hgetall(readWriteKeys('fencekit:', name)[6] as string))[0] ?? '';
      const [, , , length = '0', rest = ''] = spec.match(/^(\w+) (\d+) (\d+) (.*)$/) ?? [];
      const channel = rest.slice(0, Number(length));
      return channel !== '' && ((await raw.pubsub('NUMSUB', channel)) as [string, number])[1] === 1;
    });
    notices.setMode({ kind: 'blackhole' });
    await read.release(); // grants the writer in its script; the notice is dropped on its way
    const write = await writing;
    expect(deaf.wakeups).toBe(0);
    expect(write.held).toBe(true);
    const info = await holder.readWriteLock(name).inspect();
    expect(info.writer?.fencingToken).toBe(write.fencingToken);
    expect(info.writer?.owner).toBe('deaf');
    // Taken by its poll, whose attempt renewed the grant to the full ttl (not the provisional lease).
    expect((info.writer?.expiresAt?.getTime() ?? 0) - Date.now()).toBeGreaterThan(2_500);
    await write.release();
  });

  it('a lock, a semaphore and a read-write lock of one name never meet', async () => {
    const name = uniqueKey('rw-apart');
    const [a, b] = [open(), open()];
    const lock = await a.acquire(name, { ttlMs: 5_000 });
    const permit = await a.semaphore(name, { limit: 1 }).acquire({ ttlMs: 5_000 });
    const write = await b.readWriteLock(name).tryAcquireWrite({ ttlMs: 5_000 });
    expect(write).not.toBeNull();
    expect(await a.list(name)).toEqual([name]);
    await Promise.all([lock.release(), permit.release()]);
    expect(await a.list(name)).toEqual([name]); // the read-write grant alone
    await write?.release();
    expect(await a.list(name)).toEqual([]);
    // Once nobody holds or waits, only the fence counter is left.
    const left = await raw.keys(`fencekit:{${name}}:rw:*`);
    expect(left).toEqual([`fencekit:{${name}}:rw:fence`]);
  });

  it('a reader queued behind a waiting writer is granted with the readers after it, in one release', async () => {
    const name = uniqueKey('rw-batch');
    const providers = [open(), open(), open(), open()];
    const rw = (i: number): ReadWriteLock => (providers[i] as RedisLockProvider).readWriteLock(name);
    const first = await rw(0).acquireRead({ ttlMs: 10_000 });
    const writing = rw(1).acquireWrite({ ttlMs: 10_000, waitMs: 10_000 });
    await eventually('the writer queued', async () => (await rw(0).inspect()).waiters === 1);
    const reading = [rw(2), rw(3)].map((r) => r.acquireRead({ ttlMs: 10_000, waitMs: 10_000 }));
    await eventually('the readers queued', async () => (await rw(0).inspect()).waiters === 3);
    await first.release();
    const write = await writing;
    expect((await rw(0).inspect()).waiters).toBe(2);
    await write.release(); // grants both readers in its script
    const info = await rw(0).inspect();
    expect(info.readers).toHaveLength(2);
    expect(info.waiters).toBe(0);
    const reads = await Promise.all(reading);
    for (const read of reads) expect(read.fencingToken).toBeGreaterThan(write.fencingToken);
    await Promise.all(reads.map((r) => r.release()));
  });
});

describe('Redis read-write locks across a restart without AOF', () => {
  const cleanUp: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    // Every step runs; a provider's close() that fails (it must not) fails the test afterwards.
    const failed: unknown[] = [];
    for (const step of cleanUp.splice(0).reverse())
      await step().catch((error: unknown) => failed.push(error));
    expect(failed).toEqual([]);
  });

  it('the restarted Redis forgot the grants and the counter, but no token is given again', async () => {
    const server = await RestartableRedis.start({ aof: false });
    cleanUp.push(() => server.stop());
    const open = () => {
      const provider = new RedisLockProvider({ url: server.url, callTimeoutMs: 500 });
      cleanUp.push(() => provider.close());
      return provider;
    };
    const [a, b] = [open(), open()];
    const name = uniqueKey('rw-restart');
    const given: bigint[] = [];
    for (let i = 0; i < 5; i++) {
      const write = await a.readWriteLock(name).acquireWrite({ ttlMs: 3_000 });
      given.push(write.fencingToken);
      await write.release();
    }
    const read = await a.readWriteLock(name).acquireRead({ ttlMs: 3_000 });
    given.push(read.fencingToken);
    // B's read-write locks have reached this server, as a running client's have: it rides out the
    // restart within waitMs (one that never reached its server fails at once, as a wrong address
    // would; the grant loop counts read-write and semaphore calls for that, not lock calls).
    await b.readWriteLock(name).inspect();
    await server.kill();
    await server.startAgain(); // empty: the grants, the queue and the fence counter are gone
    const write = await b.readWriteLock(name).acquireWrite({ ttlMs: 3_000, waitMs: 10_000 });
    for (const token of given) expect(write.fencingToken).toBeGreaterThan(token);
    // The reader learns at its next renewal that its lease is gone (or cannot confirm it).
    await eventually('the reader’s signal aborts', async () => read.signal.aborted, 5_000);
    await write.release();
  });
});
