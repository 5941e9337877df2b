import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redlock } from '../../src/compat/redlock/index.js';
import { connect, InvalidArgumentError, type LockProvider, MemoryLockProvider } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// A redlock facade lock lasts `duration` from its grant, however long it waited in the queue: it is
// never handed out expired (releasing itself at once, with the next waiter granted inside its
// critical section), and its `expiration` never says "held" for a grant that is gone.

let redisServer: ServerGroup;
const targets: Array<{ name: string; provider: LockProvider }> = [];

beforeAll(async () => {
  redisServer = await startServers('redis');
  targets.push({ name: 'memory', provider: new MemoryLockProvider() });
  targets.push({ name: 'Redis', provider: await connect(endpoint(redisServer, 'REDIS_URL')) });
}, 60_000);
afterAll(async () => {
  await Promise.allSettled(targets.map(({ provider }) => provider.close()));
  await redisServer?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const key = () => uniqueKey('redlock-expiration').replace(/\//g, ':');
const names = ['memory', 'Redis'];

describe.each(names)('redlock facade on %s: duration counts from the grant', (name) => {
  const provider = () => (targets.find((t) => t.name === name) as { provider: LockProvider }).provider;
  const waitersReach = (resource: string, count: number) =>
    eventually(
      `${count} waiters on ${resource}`,
      async () => ((await provider().inspect(resource))?.waiters ?? 0) >= count,
    );

  it.each([
    { shape: 'one resource', extra: [] as string[] },
    { shape: 'two resources', extra: ['other'] },
  ])(
    '$shape: a lock granted after waiting longer than its duration is held for its duration',
    async ({ extra }) => {
      const redlock = new Redlock(provider(), { retryCount: -1 });
      const resource = key();
      const resources = [resource, ...extra.map((suffix) => `${resource}:${suffix}`)];
      const duration = 2_000;
      const first = await redlock.acquire([resource], 30_000);
      const events: string[] = [];
      const second = redlock.acquire(resources, duration).then((lock) => {
        events.push('second granted');
        return lock;
      });
      await waitersReach(resource, 1);
      const third = redlock.acquire([resource], 30_000).then((lock) => {
        events.push('third granted');
        return lock;
      });
      await waitersReach(resource, 2);
      await sleep(duration + 500); // the second waits in the queue longer than its duration
      await first.release();

      const lock = await second;
      const bornExpired = lock.expiration <= Date.now() || lock.signal.aborted;
      // Its critical section: a while, well inside its duration; the third must not get in meanwhile.
      await Promise.race([third, sleep(500)]);
      events.push('second releases');
      const released = await lock.release().then(
        () => 'released',
        (error: Error) => error.name, // ExecutionError: it had released itself
      );
      await (await third).release();
      expect({ bornExpired, events, released }).toEqual({
        bornExpired: false,
        events: ['second granted', 'second releases', 'third granted'],
        released: 'released',
      });
    },
  );

  it('a lock whose grant is lost reads expiration 0', async () => {
    const redlock = new Redlock(provider(), { retryCount: 0 });
    const resource = key();
    const lock = await redlock.acquire([resource], 3_000); // renewed each second: the loss is seen then
    expect(lock.expiration).toBeGreaterThan(Date.now());
    await provider().forceRelease?.(resource, { reason: 'test: lose the grant' });
    await eventually('the loss is seen', async () => lock.signal.aborted);
    expect(lock.expiration).toBe(0);
  });
});

it('redlock facade: a duration that leaves no time after the drift allowance is refused', async () => {
  const provider = new MemoryLockProvider();
  try {
    const redlock = new Redlock(provider);
    // drift = round(0.99 × 100) + 2 = 101 ms: such a lock would expire before it is granted
    await expect(redlock.acquire([key()], 100, { driftFactor: 0.99 })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    const lock = await redlock.acquire([key()], 5_000);
    // drift = round(0.01 × 2) + 2 = 2 ms: no time left
    await expect(lock.extend(2)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(lock.expiration).toBeGreaterThan(Date.now()); // the refused extension changed nothing
    await lock.release();
  } finally {
    await provider.close();
  }
});

it('redlock facade: an extension past 2^31 ms does not release the lock at once', async () => {
  const provider = new MemoryLockProvider();
  try {
    const redlock = new Redlock(provider, { retryCount: 0 });
    const resource = key();
    const lock = await redlock.acquire([resource], 5_000);
    const extended = await lock.extend(2 ** 32); // a timer that long would fire after 1 ms
    await sleep(200);
    expect(extended.expiration).toBeGreaterThan(Date.now());
    await expect(redlock.acquire([resource], 5_000)).rejects.toThrow(); // still held
    await extended.release();
  } finally {
    await provider.close();
  }
});
