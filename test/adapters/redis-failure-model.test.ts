import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import type { LockLostError } from '../../src/index.js';
import { uniqueKey, waitersReach } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

/**
 * The Redis rows of the failure model: for each fault of the holder's link or of the server, when
 * the holder's signal aborts and when a waiter on another provider is granted (lease 3 s, drift 1 %,
 * callTimeoutMs 1 s). The waiter must be granted only after the holder's signal aborted (while
 * Redis loses no writes). About 40 s: run with FENCEKIT_FAILURE_MODEL=1.
 */
const TTL_MS = 3_000;
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const waitFor = (signal: AbortSignal) =>
  new Promise<void>((resolve) =>
    signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true }),
  );

describe.skipIf(!process.env.FENCEKIT_FAILURE_MODEL)('Redis failure model', () => {
  let server: ServerGroup;
  let url: string;
  let target: { host: string; port: number };
  const table: string[] = ['| fault | holder’s signal aborts (reason) | waiter granted |'];
  beforeAll(async () => {
    server = await startServers('redis', { faults: true });
    url = endpoint(server, 'REDIS_URL');
    const [host = '', port = ''] = endpoint(server, 'REDIS_HOSTS').split(',')[0]?.split(':') ?? [];
    target = { host, port: Number(port) };
  });
  afterAll(async () => {
    console.log(table.join('\n'));
    await server?.stop();
  });

  const faults: Array<{ name: string; inject(proxy: FaultProxy, admin: Redis): Promise<void> }> = [
    { name: 'holder’s link partitioned (bytes held)', inject: async (p) => p.setMode({ kind: 'partition' }) },
    {
      name: 'holder’s link blackholed (bytes dropped)',
      inject: async (p) => p.setMode({ kind: 'blackhole' }),
    },
    {
      name: 'holder’s replies 5 s late',
      inject: async (p) => p.setMode({ kind: 'delay', direction: 'toClient', ms: 5_000 }),
    },
  ];

  for (const fault of faults) {
    it(fault.name, async () => {
      const proxy = await FaultProxy.start(target);
      const admin = new Redis(url);
      const holder = new RedisLockProvider({ url: `redis://${proxy.address}`, callTimeoutMs: 1_000 });
      const waiter = new RedisLockProvider({ url, callTimeoutMs: 1_000 });
      try {
        const key = uniqueKey('failure-model');
        const lock = await holder.acquire(key, { ttlMs: TTL_MS });
        const waiting = waiter.acquire(key, { ttlMs: TTL_MS, waitMs: 20_000 });
        await waitersReach(waiter, key, 1);
        const started = performance.now();
        await fault.inject(proxy, admin);
        let abortedAt = Number.NaN;
        void waitFor(lock.signal).then(() => {
          abortedAt = performance.now() - started;
        });
        const next = await waiting;
        const grantedAt = performance.now() - started;
        const reason = (lock.signal.reason as LockLostError | undefined)?.reason ?? 'live';
        table.push(`| ${fault.name} | ${seconds(abortedAt)} (${reason}) | ${seconds(grantedAt)} |`);
        expect(lock.signal.aborted, 'the holder was told before the next grant').toBe(true);
        expect(abortedAt).toBeLessThan(grantedAt);
        expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
        await next.release();
      } finally {
        proxy.setMode({ kind: 'pass' });
        await Promise.allSettled([holder.close(), waiter.close()]);
        await proxy.close();
        admin.disconnect();
      }
    }, 30_000);
  }

  it('server paused (SIGSTOP) 5 s: every client waits; the holder stops first', async () => {
    const holder = new RedisLockProvider({ url, callTimeoutMs: 1_000 });
    const waiter = new RedisLockProvider({ url, callTimeoutMs: 1_000 });
    try {
      const key = uniqueKey('failure-model-pause');
      const lock = await holder.acquire(key, { ttlMs: TTL_MS });
      const waiting = waiter.acquire(key, { ttlMs: TTL_MS, waitMs: 20_000 });
      await waitersReach(waiter, key, 1);
      const started = performance.now();
      let abortedAt = Number.NaN;
      void waitFor(lock.signal).then(() => {
        abortedAt = performance.now() - started;
      });
      await server.members[0]?.pause();
      await new Promise((r) => setTimeout(r, 5_000));
      await server.members[0]?.resume();
      const next = await waiting;
      const grantedAt = performance.now() - started;
      const reason = (lock.signal.reason as LockLostError | undefined)?.reason ?? 'live';
      table.push(`| server paused 5 s | ${seconds(abortedAt)} (${reason}) | ${seconds(grantedAt)} |`);
      expect(lock.signal.aborted).toBe(true);
      expect(abortedAt).toBeLessThan(grantedAt);
      await next.release();
    } finally {
      await Promise.allSettled([holder.close(), waiter.close()]);
    }
  }, 30_000);
});
