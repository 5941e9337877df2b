import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// More waiting acquires than the server has connections: waiters must not hold one each.
const SERVER_MAX_CONNECTIONS = 100;
const PROVIDERS = 20;
const WAITERS_PER_PROVIDER = 50;
const POOL_PER_PROVIDER = 10; // 20 × 10 = 200 pooled connections allowed, twice the server's limit

describe('PostgreSQL waiters at scale', () => {
  let server: ServerGroup | undefined;
  let url = '';
  const providers: PostgresLockProvider[] = [];
  beforeAll(async () => {
    server = await startServers('postgres', { maxConnections: SERVER_MAX_CONNECTIONS });
    url = endpoint(server, 'PG_URL');
    for (let i = 0; i < PROVIDERS; i++) {
      providers.push(new PostgresLockProvider({ connectionString: url, maxConnections: POOL_PER_PROVIDER }));
    }
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await server?.stop();
  });

  it('1,000 waiters on one name, 20 providers, max_connections = 100: every one granted, in token order', async () => {
    const key = uniqueKey('thousand-waiters');
    const tokens: bigint[] = [];
    const errors: string[] = [];
    let inside = 0;
    let overlaps = 0;
    const acquires = providers.slice(0, PROVIDERS).flatMap((provider) =>
      Array.from({ length: WAITERS_PER_PROVIDER }, async () => {
        try {
          const lock = await provider.acquire(key, { waitMs: 120_000 });
          inside += 1;
          if (inside > 1) overlaps += 1;
          tokens.push(lock.fencingToken);
          await new Promise((r) => setImmediate(r)); // a short hold that lets others run
          inside -= 1;
          await lock.release();
        } catch (error) {
          errors.push((error as Error).message);
        }
      }),
    );
    await Promise.all(acquires);
    const failures = [...new Set(errors)].slice(0, 3);
    const rising = tokens.every((token, i) => i === 0 || token > (tokens[i - 1] as bigint));
    expect({ failed: errors.length, failures, granted: tokens.length, overlaps, rising }).toEqual({
      failed: 0,
      failures: [],
      granted: PROVIDERS * WAITERS_PER_PROVIDER,
      overlaps: 0,
      rising: true,
    });
  }, 240_000);

  it('1,000 waiting permit requests on one semaphore, 20 providers, max_connections = 100: all granted, never over the limit', async () => {
    const name = uniqueKey('thousand-permits');
    const limit = 3;
    const tokens = new Set<bigint>();
    const errors: string[] = [];
    let inside = 0;
    let peak = 0;
    const requests = providers.slice(0, PROVIDERS).flatMap((provider) => {
      const semaphore = provider.semaphore(name, { limit });
      return Array.from({ length: WAITERS_PER_PROVIDER }, async () => {
        try {
          const permit = await semaphore.acquire({ waitMs: 120_000 });
          inside += 1;
          peak = Math.max(peak, inside);
          tokens.add(permit.fencingToken);
          await new Promise((r) => setImmediate(r));
          inside -= 1;
          await permit.release();
        } catch (error) {
          errors.push((error as Error).message);
        }
      });
    });
    await Promise.all(requests);
    const failures = [...new Set(errors)].slice(0, 3);
    expect({ failed: errors.length, failures, distinctTokens: tokens.size, overLimit: peak > limit }).toEqual(
      {
        failed: 0,
        failures: [],
        distinctTokens: PROVIDERS * WAITERS_PER_PROVIDER,
        overLimit: false,
      },
    );
  }, 240_000);

  it('waiters lined up in process: a cancelled or timed-out one leaves the line, the one behind it is granted', async () => {
    const [holder, waiting] = [0, 1].map(() => {
      const provider = new PostgresLockProvider({ connectionString: url });
      providers.push(provider);
      return provider;
    }) as [PostgresLockProvider, PostgresLockProvider];
    const key = uniqueKey('line-cancel');
    const lock = await holder.acquire(key);
    const first = waiting.acquire(key, { waitMs: 60_000 }); // queued on the server
    const deadline = performance.now() + 10_000;
    while ((await waiting.inspect(key))?.waiters !== 1 && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const controller = new AbortController();
    const aborted = waiting.acquire(key, { signal: controller.signal }).then(
      () => 'granted',
      (error: { code?: string }) => error.code,
    );
    const timedOut = waiting.acquire(key, { waitMs: 300 }).then(
      () => 'granted',
      (error: { code?: string }) => error.code,
    );
    const last = waiting.acquire(key, { waitMs: 60_000 });
    const outcomes = { timedOut: await timedOut, aborted: '' };
    controller.abort(new Error('shutting down'));
    outcomes.aborted = (await aborted) ?? '';
    const waitersAfterCancels = (await waiting.inspect(key))?.waiters;
    await lock.release();
    const firstLock = await first;
    await firstLock.release();
    const lastLock = await last;
    const rising =
      lastLock.fencingToken > firstLock.fencingToken && firstLock.fencingToken > lock.fencingToken;
    await lastLock.release();
    expect({ ...outcomes, waitersAfterCancels, rising, left: await holder.inspect(key) }).toEqual({
      aborted: 'ABORTED',
      timedOut: 'LOCK_TIMEOUT',
      waitersAfterCancels: 2,
      rising: true,
      left: null,
    });
  });

  it('inspect() of a lock and of a semaphore counts the waiters lined up in process behind the one queued on the server', async () => {
    const [holder, waiting] = [0, 1].map(() => {
      const provider = new PostgresLockProvider({ connectionString: url });
      providers.push(provider);
      return provider;
    }) as [PostgresLockProvider, PostgresLockProvider];
    const key = uniqueKey('counted');
    const lock = await holder.acquire(key);
    const waits = [1, 2, 3].map(() => waiting.acquire(key, { waitMs: 60_000 }));
    const deadline = performance.now() + 10_000;
    while ((await waiting.inspect(key))?.waiters !== 3 && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const seen = await waiting.inspect(key);
    await lock.release();
    for (const wait of waits) await (await wait).release();
    const name = uniqueKey('counted-permits');
    const permit = await holder.semaphore(name, { limit: 1 }).acquire();
    const semaphore = waiting.semaphore(name, { limit: 1 });
    const permitWaits = [1, 2, 3].map(() => semaphore.acquire({ waitMs: 60_000 }));
    while ((await semaphore.inspect()).waiters !== 3 && performance.now() < deadline + 10_000) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const seenPermits = await semaphore.inspect();
    await permit.release();
    for (const wait of permitWaits) await (await wait).release();
    expect({ lockWaiters: seen?.waiters, permitWaiters: seenPermits.waiters }).toEqual({
      lockWaiters: 3,
      permitWaiters: 3,
    });
  });
});
