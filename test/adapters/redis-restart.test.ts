import { afterEach, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { RestartableRedis } from '../servers/redis-restartable.js';

/** A Redis that crashes (SIGKILL) and comes back on the same port, with and without AOF. */
describe('Redis adapter across a Redis restart', () => {
  const cleanUp: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const step of cleanUp.splice(0).reverse()) await step().catch(() => undefined);
  });
  const setUp = async (aof: boolean) => {
    const server = await RestartableRedis.start({ aof });
    cleanUp.push(() => server.stop());
    const open = () => {
      const provider = new RedisLockProvider({ url: server.url });
      cleanUp.push(() => provider.close());
      return provider;
    };
    return { server, open };
  };

  it('without AOF: the restarted Redis forgot the grant, but tokens never go backwards', async () => {
    const { server, open } = await setUp(false);
    const [a, b] = [open(), open()];
    const key = uniqueKey('restart-no-aof');
    const lockA = await a.acquire(key, { ttlMs: 3_000 });
    let abortedAt = 0;
    lockA.signal.addEventListener('abort', () => {
      abortedAt = performance.now();
    });
    await server.kill();
    await server.startAgain(); // empty: the lock key and the fence counter are gone
    const lockB = await b.acquire(key, { ttlMs: 3_000, waitMs: 10_000 });
    const grantedB = performance.now();
    // A learns at its next renewal that the key is not its own any more (or cannot confirm it).
    await eventually('A’s signal aborts', async () => lockA.signal.aborted, 4_000);
    const reason = (lockA.signal.reason as { reason?: string }).reason;
    console.log(
      `before the restart A held token ${lockA.fencingToken}; after it B got ${lockB.fencingToken}; A's signal aborted (${reason}) ${Math.round(abortedAt - grantedB)} ms after B's grant`,
    );
    expect(lockB.fencingToken).toBeGreaterThan(lockA.fencingToken);
    await lockB.release();
  });

  it('with AOF: a ~5 s crash and restart neither loses the holder nor fails a waiter whose waitMs is 30 s', async () => {
    const { server, open } = await setUp(true);
    const [a, w] = [open(), open()];
    const key = uniqueKey('restart-aof');
    const lockA = await a.acquire(key, { ttlMs: 15_000 });
    const started = performance.now();
    const waiting = w.acquire(key, { ttlMs: 15_000, waitMs: 30_000 }).then(
      (lock) => ({ lock, ms: Math.round(performance.now() - started) }),
      (error: { code?: string }) => ({
        error: error.code ?? String(error),
        ms: Math.round(performance.now() - started),
      }),
    );
    await eventually('W queued', async () => (await a.inspect(key))?.waiters === 1);
    await server.kill();
    await new Promise((r) => setTimeout(r, 5_000));
    await server.startAgain();
    await eventually(
      'A renewed on the restarted Redis',
      async () => (await a.inspect(key).catch(() => null)) !== null,
      5_000,
    );
    expect(lockA.held).toBe(true); // the AOF kept its key; its lease outlived the outage
    await lockA.release();
    const outcome = await waiting;
    console.log(
      'lock' in outcome
        ? `W held the key ${outcome.ms} ms after it asked, token ${outcome.lock.fencingToken} > ${lockA.fencingToken}`
        : `W failed after ${outcome.ms} ms with ${outcome.error}`,
    );
    expect('lock' in outcome && outcome.lock.fencingToken > lockA.fencingToken).toBe(true);
    if ('lock' in outcome) await outcome.lock.release();
  });
});
