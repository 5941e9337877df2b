import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as facade from '../../src/compat/redis-semaphore/index.js';
import { connect, type LockProvider, MemoryLockProvider } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// One Mutex / Semaphore / MultiSemaphore object shared by concurrent requests, as an app that makes
// it once at start-up does. redis-semaphore's object is one holder (its identifier): whatever the
// calls, release() leaves nothing of it on the server. The facade must leave no grant held or
// renewed either once the object's holder has released. (The original is not run here: each of its
// acquires starts a refresh timer that nothing stops, which outlives the test's Redis client.)

type AnyLock = {
  isAcquired: boolean;
  acquire(): Promise<void>;
  tryAcquire(): Promise<boolean>;
  release(): Promise<void>;
};
type Kind = 'mutex' | 'semaphore' | 'multi-semaphore';
interface Shape {
  kind: Kind;
  /** How many requests may hold at once (limit / permits). */
  holders: number;
  make(lib: typeof facade, client: never, key: string, options: object): AnyLock;
}
interface Subject {
  name: string;
  lib: typeof facade;
  client(): never;
  /** Grants (a mutex holder, or permits) the server holds now under `key`. */
  heldOnServer(shape: Shape, key: string): Promise<number>;
}

const shapes: Shape[] = [
  { kind: 'mutex', holders: 1, make: (lib, client, key, o) => new lib.Mutex(client, key, o) },
  { kind: 'semaphore', holders: 3, make: (lib, client, key, o) => new lib.Semaphore(client, key, 3, o) },
  {
    kind: 'multi-semaphore',
    holders: 2, // 2 × 2 permits of 4
    make: (lib, client, key, o) => new lib.MultiSemaphore(client, key, 4, 2, o),
  },
];

let redisServer: ServerGroup;
let raw: Redis;
let inspector: LockProvider;
let memory: MemoryLockProvider;
const closers: Array<() => unknown> = [];

/** What fencekit holds under a facade's key, on whichever provider `over` is. */
async function fencekitHeld(over: LockProvider, shape: Shape, key: string): Promise<number> {
  if (shape.kind === 'mutex') return (await over.inspect(`mutex:${key}`))?.holder ? 1 : 0;
  const limit = shape.kind === 'semaphore' ? 3 : 4;
  const info = await over.semaphore?.(`semaphore:${key}`, { limit }).inspect(); // both kinds share it
  return (info?.holders ?? []).reduce((sum, holder) => sum + holder.permits, 0);
}

/** What redis-semaphore's keys hold: the mutex key, or the semaphore's members (one per permit). */
async function redisSemaphoreHeld(shape: Shape, key: string): Promise<number> {
  if (shape.kind === 'mutex') return raw.exists(`mutex:${key}`);
  return raw.zcard(`semaphore:${key}`);
}

const subjects: Subject[] = [
  {
    name: "facade over an ioredis client (Redis, redis-semaphore's layout)",
    lib: facade,
    client: () => raw as never,
    heldOnServer: (shape, key) => redisSemaphoreHeld(shape, key),
  },
  {
    name: 'facade over the memory provider',
    lib: facade,
    client: () => memory as never,
    heldOnServer: (shape, key) => fencekitHeld(memory, shape, key),
  },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const key = () => uniqueKey('rs-shared').replace(/\//g, ':');
/** A short lease, so that a grant left behind would have been renewed many times by the end. */
const options = { lockTimeout: 600, acquireTimeout: 5_000, retryInterval: 10 };

beforeAll(async () => {
  redisServer = await startServers('redis');
  raw = new Redis(endpoint(redisServer, 'REDIS_URL'));
  inspector = await connect(endpoint(redisServer, 'REDIS_URL'));
  memory = new MemoryLockProvider();
}, 60_000);
afterAll(async () => {
  await Promise.allSettled(closers.map((close) => close()));
  await Promise.allSettled([inspector?.close(), memory?.close()]);
  raw?.disconnect();
  await redisServer?.stop();
});

describe.each(subjects)('one object shared by concurrent requests: $name', (subject) => {
  /**
   * Once the shared object is released and a lease's length has passed, `holders` fresh objects
   * (each its own holder) must all get in: nothing of the shared object is still held or renewed.
   */
  async function expectNothingLeftBehind(shape: Shape, k: string): Promise<void> {
    await sleep(2 * options.lockTimeout); // a grant left behind but not renewed would expire here
    expect(await subject.heldOnServer(shape, k)).toBe(0);
    const fresh = Array.from({ length: shape.holders }, () =>
      shape.make(subject.lib, subject.client(), k, { ...options, acquireTimeout: 2_000 }),
    );
    const got = await Promise.all(fresh.map((lock) => lock.tryAcquire()));
    await Promise.all(fresh.map((lock) => lock.release()));
    expect(got).toEqual(fresh.map(() => true));
  }

  it.each(shapes)('$kind: concurrent acquire/release pairs leave no grant held or renewed', async (shape) => {
    const k = key();
    const shared = shape.make(subject.lib, subject.client(), k, options);
    let inside = 0;
    let mostInside = 0;
    const request = async () => {
      await shared.acquire();
      mostInside = Math.max(mostInside, ++inside);
      try {
        await sleep(30);
      } finally {
        inside--;
        await shared.release();
      }
    };
    await Promise.all(Array.from({ length: shape.holders }, request));
    expect(shared.isAcquired).toBe(false);
    await expectNothingLeftBehind(shape, k);
    expect(mostInside).toBe(1); // one object, one holder: the requests take turns
  });

  it.each(shapes)('$kind: acquire twice, then release: nothing stays held', async (shape) => {
    const k = key();
    const shared = shape.make(subject.lib, subject.client(), k, { ...options, acquireTimeout: 300 });
    await shared.acquire();
    await shared.tryAcquire(); // the original shares the held permit where there is room, else waits
    await shared.release();
    expect(shared.isAcquired).toBe(false);
    await expectNothingLeftBehind(shape, k);
  });
});

describe('one shared object: a call waiting for its turn', () => {
  it('gives up within its acquireTimeout (TimeoutError) and on its abort signal', async () => {
    const shared = new facade.Semaphore(memory, key(), 3, { acquireTimeout: 200 });
    await shared.acquire();
    await expect(shared.acquire()).rejects.toBeInstanceOf(facade.TimeoutError);
    const controller = new AbortController();
    const waiting = new facade.Semaphore(memory, key(), 3, { acquireTimeout: 60_000 });
    await waiting.acquire();
    const aborted = waiting.acquire(controller.signal).catch((error: unknown) => error);
    const reason = new Error('test: the request went away');
    controller.abort(reason);
    expect(await aborted).toBe(reason); // the signal's own reason, as redis-semaphore rejects
    await Promise.all([shared.release(), waiting.release()]);
  });
});
