import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import * as facade from '../../src/compat/redis-semaphore/index.js';
import { connect, InvalidArgumentError, type LockProvider, MemoryLockProvider } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

// One redis-semaphore object shared by concurrent requests: each successful acquire() is a turn
// that only its own release() ends. A grant that ends on its own (lost, or expired with
// `refreshInterval: 0`) keeps the turn, so that the next caller is not granted inside the first
// one's critical section, and the first one's release() (still owed) never gives back the next
// one's grant.

let redisServer: ServerGroup;
let raw: Redis;
let inspector: LockProvider;
let memory: MemoryLockProvider;

beforeAll(async () => {
  redisServer = await startServers('redis');
  raw = new Redis(endpoint(redisServer, 'REDIS_URL'));
  inspector = await connect(endpoint(redisServer, 'REDIS_URL'));
  memory = new MemoryLockProvider();
}, 60_000);
afterAll(async () => {
  await Promise.allSettled([inspector?.close(), memory?.close()]);
  raw?.disconnect();
  await redisServer?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const key = () => uniqueKey('rs-turns').replace(/\//g, ':');

interface Subject {
  name: string;
  client(): never;
  /** The provider that sees the facade's grants (to take one away). */
  over(): LockProvider;
  /** What every object is made with: over a client, the layout that provider sees. */
  options: object;
}
const subjects: Subject[] = [
  {
    name: "Redis (ioredis client, fencekit's layout)",
    client: () => raw as never,
    over: () => inspector,
    options: { layout: 'fencekit' },
  },
  { name: 'memory provider', client: () => memory as never, over: () => memory, options: {} },
];

type Shared = {
  isAcquired: boolean;
  fencingToken: bigint | undefined;
  acquire(): Promise<void>;
  release(): Promise<void>;
};
const shapes = [
  { kind: 'Mutex', make: (client: never, k: string, o: object): Shared => new facade.Mutex(client, k, o) },
  {
    kind: 'Semaphore',
    make: (client: never, k: string, o: object): Shared => new facade.Semaphore(client, k, 2, o),
  },
];

describe.each(subjects)('one shared object on $name: a turn lasts until its own release()', (subject) => {
  it.each(shapes)(
    '$kind, refreshInterval 0: a grant that expired keeps its turn; the next one is granted after release()',
    async ({ make }) => {
      const lockTimeout = 1_000;
      const shared = make(subject.client(), key(), {
        ...subject.options,
        lockTimeout,
        refreshInterval: 0,
        acquireTimeout: 20_000,
      });
      const events: string[] = [];
      await shared.acquire();
      events.push('A granted');
      const second = shared.acquire().then(() => {
        events.push('B granted');
        return { held: shared.isAcquired, token: shared.fencingToken };
      });
      await sleep(lockTimeout + 1_000); // A still works after its grant expired
      expect(shared.isAcquired).toBe(false); // expired: not held, release() still owed
      events.push('A releases');
      await shared.release();
      const b = await second;
      const heldAfterRelease = shared.isAcquired;
      await shared.release();
      expect({ events, bHeldWhenGranted: b.held, heldAfterRelease }).toEqual({
        events: ['A granted', 'A releases', 'B granted'],
        bHeldWhenGranted: true,
        heldAfterRelease: true,
      });
    },
  );

  it('Mutex: a lost grant keeps its turn; its owed release() does not end the next grant', async () => {
    const k = key();
    const lost: Error[] = [];
    const shared = new facade.Mutex(subject.client(), k, {
      ...subject.options,
      lockTimeout: 3_000,
      acquireTimeout: 20_000,
      onLockLost: (error) => void lost.push(error),
    });
    const events: string[] = [];
    await shared.acquire();
    events.push('A granted');
    const second = shared.acquire().then(() => events.push('B granted'));
    await subject.over().forceRelease?.(`mutex:${k}`, { reason: 'test: take the grant away' });
    await eventually('A saw its loss', async () => lost.length > 0, 10_000);
    await sleep(300); // B would be granted now if the loss had passed the turn on
    events.push('A releases');
    await shared.release();
    await second;
    const heldByB = shared.isAcquired;
    const onServer = (await subject.over().inspect(`mutex:${k}`))?.holder != null;
    await shared.release();
    expect({ events, heldByB, onServer, lost: lost.length }).toEqual({
      events: ['A granted', 'A releases', 'B granted'],
      heldByB: true,
      onServer: true,
      lost: 1,
    });
  });
});

describe('redis-semaphore facade: refused and reported', () => {
  it('acquiredExternally and externallyAcquiredIdentifier are refused with InvalidArgumentError', () => {
    const adopt = [
      { identifier: 'taken-by-the-scheduler', acquiredExternally: true },
      { externallyAcquiredIdentifier: 'taken-by-the-scheduler' },
    ];
    for (const options of adopt) {
      expect(() => new facade.Mutex(memory, key(), options as never)).toThrow(InvalidArgumentError);
      expect(() => new facade.Semaphore(memory, key(), 2, options as never)).toThrow(InvalidArgumentError);
    }
  });

  it('what an onLockLost throws is an unhandled rejection, as in redis-semaphore; the loss still reported', async () => {
    const k = key();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const mutex = new facade.Mutex(memory, k, {
        onLockLost: () => {
          throw { code: 'not an Error' };
        },
      });
      await mutex.acquire();
      await memory.forceRelease(`mutex:${k}`, { reason: 'test: take the grant away' });
      await eventually('the loss was reported', async () => unhandled.length > 0, 5_000);
      expect(unhandled).toEqual([{ code: 'not an Error' }]);
      expect(mutex.isAcquired).toBe(false);
      await mutex.release();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('refreshInterval 0: an expiry whose delete fails (Redis refusing) rejects nothing unhandled', async () => {
    const [host = '', port = ''] = endpoint(redisServer, 'REDIS_HOSTS').split(',')[0]?.split(':') ?? [];
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    const provider = new RedisLockProvider({ url: `redis://${proxy.address}`, callTimeoutMs: 300 });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const lockTimeout = 2_000;
      const mutex = new facade.Mutex(provider, key(), { lockTimeout, refreshInterval: 0 });
      await mutex.acquire();
      await sleep(lockTimeout / 2); // renewed once by now: still held when the expiry fires
      proxy.setMode({ kind: 'refuse' });
      await sleep(lockTimeout / 2 + 1_500); // the expiry fired and its delete failed
      expect(unhandled).toEqual([]);
      proxy.setMode({ kind: 'pass' });
      await mutex.release();
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await provider.close().catch(() => undefined); // the proxy may have cut it
      await proxy.close();
    }
  });
});
