import { Redis } from 'ioredis';
import Redlock4 from 'redlock';
import Redlock5, {
  ExecutionError as ExecutionError5,
  ResourceLockedError as ResourceLockedError5,
} from 'redlock5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockKeys } from '../../adapters/redis/scripts.js';
import * as facade from '../../src/compat/redlock/index.js';
import { connect, type LockProvider } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startAll, startServers } from '../servers/index.js';

// One app's use of redlock, written against redlock's documented behaviour, run on redlock itself
// (v5 = 5.0.0-beta.2 under the alias `redlock5`, and v4) and on fencekit's facade over Redis
// clients as redlock takes them, etcd and ZooKeeper — with the same assertions. Where the facade
// deliberately differs, the case says so and runs only where it applies.

type V5 = {
  acquire(resources: string[], duration: number, settings?: object): Promise<V5Lock>;
  release(lock: V5Lock, settings?: object): Promise<unknown>;
  extend(lock: V5Lock, duration: number, settings?: object): Promise<V5Lock>;
  using<T>(
    resources: string[],
    duration: number,
    settings: object,
    routine: (signal: AbortSignal & { error?: Error }) => Promise<T>,
  ): Promise<T>;
  quit(): Promise<void>;
};
type V5Lock = {
  resources: string[];
  value: string;
  expiration: number;
  release(): Promise<unknown>;
  extend(d: number): Promise<V5Lock>;
};
type V4Lock = {
  resource: string | string[];
  value: string;
  expiration: number;
  unlock(): Promise<unknown>;
  extend(ttl: number): Promise<V4Lock>;
};
type V4 = {
  lock(resource: string | string[], ttl: number): Promise<V4Lock>;
  unlock(lock: V4Lock): Promise<unknown>;
  quit(): Promise<void>;
};

interface Subject {
  name: string;
  original: boolean;
  make(settings: object): Promise<V5>;
  ExecutionError: new (...args: never[]) => Error;
  ResourceLockedError: new (...args: never[]) => Error;
  /** Deletes a resource's grant behind its holder's back (where the test knows the key). */
  steal?: (resource: string) => Promise<void>;
  /** fencekit's layout: waiters queue (and a lost lock's release in `using` is quiet). */
  queued: boolean;
}

let redisServer: ServerGroup;
let etcdServer: ServerGroup;
let zkServer: ServerGroup;
let redisUrl: string;
let raw: Redis;
const closers: Array<() => Promise<unknown>> = [];

async function overProvider(url: string, settings: object): Promise<V5> {
  const provider: LockProvider = await connect(url);
  const redlock = new facade.Redlock(provider, settings);
  closers.push(() => redlock.quit());
  return redlock as unknown as V5;
}

const subjects: Subject[] = [
  {
    name: 'redlock 5.0.0-beta.2 (the original)',
    original: true,
    queued: false,
    steal: async (resource) => void (await raw.del(resource)),
    make: async (settings) => {
      const redlock = new Redlock5([new Redis(redisUrl)], settings);
      closers.push(() => redlock.quit());
      return redlock as unknown as V5;
    },
    ExecutionError: ExecutionError5,
    ResourceLockedError: ResourceLockedError5,
  },
  {
    name: "facade over an ioredis client (Redis, redlock's layout)",
    original: false,
    queued: false,
    steal: async (resource) => void (await raw.del(resource)),
    make: async (settings) => {
      const redlock = new facade.Redlock([new Redis(redisUrl)], settings);
      closers.push(() => redlock.quit());
      return redlock as unknown as V5;
    },
    ExecutionError: facade.ExecutionError,
    ResourceLockedError: facade.ResourceLockedError,
  },
  {
    name: "facade over an ioredis client (Redis, fencekit's layout)",
    original: false,
    queued: true,
    steal: async (resource) => void (await raw.del(lockKeys('fencekit:', resource).lock)),
    make: async (settings) => {
      const redlock = new facade.Redlock([new Redis(redisUrl)], { ...settings, layout: 'fencekit' });
      closers.push(() => redlock.quit());
      return redlock as unknown as V5;
    },
    ExecutionError: facade.ExecutionError,
    ResourceLockedError: facade.ResourceLockedError,
  },
  {
    name: 'facade over etcd',
    original: false,
    queued: true,
    make: (settings) =>
      overProvider(`etcd://${endpoint(etcdServer, 'ETCD_ENDPOINTS').replace(/https?:\/\//g, '')}`, settings),
    ExecutionError: facade.ExecutionError,
    ResourceLockedError: facade.ResourceLockedError,
  },
  {
    name: 'facade over ZooKeeper',
    original: false,
    queued: true,
    make: (settings) => overProvider(`zk://${endpoint(zkServer, 'ZK_CONNECT')}`, settings),
    ExecutionError: facade.ExecutionError,
    ResourceLockedError: facade.ResourceLockedError,
  },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  [redisServer, etcdServer, zkServer] = await startAll([
    startServers('redis'),
    startServers('etcd'),
    startServers('zookeeper'),
  ]);
  redisUrl = endpoint(redisServer, 'REDIS_URL');
  raw = new Redis(redisUrl);
}, 90_000);
afterAll(async () => {
  await Promise.allSettled(closers.map((close) => close()));
  raw?.disconnect();
  await Promise.allSettled([redisServer?.stop(), etcdServer?.stop(), zkServer?.stop()]);
});

describe.each(subjects)('redlock v5 API: $name', (subject) => {
  let redlock: V5;
  /** Tries once: a held resource fails at once. */
  let once: V5;
  beforeAll(async () => {
    redlock = await subject.make({ retryCount: 20, retryDelay: 100, retryJitter: 50 });
    once = await subject.make({ retryCount: 0 });
  });
  const key = () => uniqueKey('redlock-app').replace(/\//g, ':');

  it('acquire returns a lock with its resources, a value and an expiration of duration minus drift', async () => {
    const resource = key();
    const before = Date.now();
    const lock = await redlock.acquire([resource], 2_000);
    const after = Date.now();
    expect(lock.resources).toEqual([resource]);
    expect(typeof lock.value).toBe('string');
    expect(lock.value.length).toBeGreaterThan(0);
    // drift = round(0.01 × 2000) + 2 = 22 ms
    expect(lock.expiration).toBeGreaterThanOrEqual(before + 2_000 - 22);
    expect(lock.expiration).toBeLessThanOrEqual(after + 2_000 - 22);
    await lock.release();
  });

  it('a held resource: acquire fails with ExecutionError whose attempt holds a ResourceLockedError vote', async () => {
    const resource = key();
    const lock = await redlock.acquire([resource], 5_000);
    const error = await once.acquire([resource], 5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(subject.ExecutionError);
    const { attempts } = error as { attempts: Array<Promise<{ votesAgainst: Map<unknown, Error> }>> };
    const stats = await attempts[attempts.length - 1];
    expect(
      [...(stats?.votesAgainst.values() ?? [])].some((e) => e instanceof subject.ResourceLockedError),
    ).toBe(true);
    await lock.release();
    const next = await once.acquire([resource], 5_000);
    await next.release();
  });

  it('a waiter within its retry window gets the resource once it is released', async () => {
    const resource = key();
    const lock = await redlock.acquire([resource], 5_000);
    const waiting = redlock.acquire([resource], 5_000);
    await sleep(150);
    await lock.release();
    const next = await waiting;
    expect(next.value).not.toBe(lock.value);
    await next.release();
  });

  it('an unreleased lock expires after its duration', async () => {
    const resource = key();
    await redlock.acquire([resource], 300);
    await sleep(600);
    const next = await once.acquire([resource], 1_000);
    await next.release();
  });

  it('extend gives a new lock with a later expiration and invalidates the old one', async () => {
    const resource = key();
    const lock = await redlock.acquire([resource], 400);
    const extended = await lock.extend(3_000);
    expect(extended.expiration).toBeGreaterThan(Date.now() + 2_000);
    expect(lock.expiration).toBe(0);
    expect(extended.value).toBe(lock.value);
    await sleep(600); // past the first duration: still held thanks to the extension
    await expect(once.acquire([resource], 1_000)).rejects.toBeInstanceOf(subject.ExecutionError);
    await extended.release();
    await expect(redlock.extend(extended, 1_000)).rejects.toBeInstanceOf(subject.ExecutionError);
  });

  it('releasing a lock twice: the second release fails with ExecutionError', async () => {
    const lock = await redlock.acquire([key()], 5_000);
    await redlock.release(lock, { retryCount: 0 });
    expect(lock.expiration).toBe(0);
    await expect(redlock.release(lock, { retryCount: 0 })).rejects.toBeInstanceOf(subject.ExecutionError);
  });

  it('multi-resource locks exclude any lock sharing a resource, and opposite orders do not deadlock', async () => {
    const [a, b, c] = [key(), key(), key()];
    const ab = await redlock.acquire([a, b], 5_000);
    await expect(once.acquire([b, c], 5_000)).rejects.toBeInstanceOf(subject.ExecutionError);
    const cOnly = await once.acquire([c], 5_000); // untouched by the failed attempt
    await cOnly.release();
    await ab.release();
    // Two callers, opposite orders, many rounds: both always finish.
    const round = async (order: string[]) => {
      for (let i = 0; i < 5; i++) {
        const lock = await redlock.acquire(order, 5_000);
        await sleep(5);
        await lock.release();
      }
    };
    await Promise.all([round([a, b]), round([b, a])]);
  });

  it('using runs the routine under the lock with an un-aborted signal, returns its value and releases', async () => {
    const resource = key();
    const result = await redlock.using([resource], 1_000, { retryCount: 0 }, async (signal) => {
      expect(signal.aborted).toBe(false);
      await expect(once.acquire([resource], 1_000)).rejects.toBeInstanceOf(subject.ExecutionError);
      await sleep(1_200); // longer than the duration: kept by auto-extension
      expect(signal.aborted).toBe(false);
      await expect(once.acquire([resource], 1_000)).rejects.toBeInstanceOf(subject.ExecutionError);
      return 42;
    });
    expect(result).toBe(42);
    const next = await once.acquire([resource], 1_000);
    await next.release();
  });

  it.skipIf(!subject.steal)(
    'using: a lock lost while the routine runs aborts its signal, with signal.error',
    async () => {
      const resource = key();
      let seen: unknown;
      const outcome = await redlock
        .using([resource], 1_000, { retryCount: 0 }, async (signal) => {
          await subject.steal?.(resource);
          const started = Date.now();
          while (!signal.aborted && Date.now() - started < 4_000) await sleep(20);
          seen = { aborted: signal.aborted, error: signal.error instanceof Error };
          return 'done';
        })
        .catch((error: unknown) => (error as Error).constructor.name);
      expect(seen).toEqual({ aborted: true, error: true });
      // The original's using() then rejects, as its final release finds the key gone (after
      // retrying), and so does the facade on redlock's layout. Deliberate difference on fencekit's
      // layout: the release of a lost lock is quiet, and the routine's value stands.
      expect(outcome).toBe(subject.queued ? 'done' : 'ExecutionError');
    },
  );

  it('using rejects a duration not 100 ms above automaticExtensionThreshold', async () => {
    await expect(redlock.using([key()], 500, {}, async () => 1)).rejects.toThrow(
      /automaticExtensionThreshold/,
    );
  });

  // Deliberate differences: the original has neither fencing tokens nor a fair queue.
  it.skipIf(subject.original)(
    'facade only: every grant carries a fencing token that rises per resource',
    async () => {
      const resource = key();
      const first = (await redlock.acquire([resource], 5_000)) as unknown as facade.Lock;
      await first.release();
      const second = (await redlock.acquire([resource], 5_000)) as unknown as facade.Lock;
      expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
      await second.release();
    },
  );

  it.skipIf(!subject.queued)(
    "facade on fencekit's layout only: waiters are granted in arrival order (redlock polls, so any of them may win)",
    async () => {
      const resource = key();
      const held = await redlock.acquire([resource], 5_000);
      const order: number[] = [];
      const waiters = [0, 1, 2].map(async (i) => {
        await sleep(i * 100);
        const lock = await redlock.acquire([resource], 5_000);
        order.push(i);
        await sleep(20);
        await lock.release();
      });
      await sleep(400);
      await held.release();
      await Promise.all(waiters);
      expect(order).toEqual([0, 1, 2]);
    },
  );
});

const v4Subjects = [
  {
    name: 'redlock 4.2.0 (the original)',
    Redlock: Redlock4 as unknown as typeof facade.Redlock,
    clients: true,
  },
  { name: 'facade over an ioredis client (Redis)', Redlock: facade.Redlock, clients: true },
  { name: 'facade over etcd', Redlock: facade.Redlock, clients: false },
];

describe.each(v4Subjects)('redlock v4 names: $name', (subject) => {
  let redlock: V4;
  let once: V4;
  beforeAll(async () => {
    const open = async (settings: object) => {
      const target = subject.clients
        ? [new Redis(redisUrl)]
        : await connect(`etcd://${endpoint(etcdServer, 'ETCD_ENDPOINTS').replace(/https?:\/\//g, '')}`);
      const r = new subject.Redlock(target as never, settings);
      closers.push(() => r.quit());
      return r as unknown as V4;
    };
    redlock = await open({ retryCount: 20, retryDelay: 100 });
    once = await open({ retryCount: 0 });
  });

  it('lock(resource, ttl) → lock.resource, unlock, extend; a held resource fails with LockError', async () => {
    const resource = uniqueKey('redlock-v4').replace(/\//g, ':');
    const lock = await redlock.lock(resource, 2_000);
    expect(lock.resource).toEqual([resource]); // v4.2 keeps the resource as an array
    const error = await once.lock(resource, 2_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(subject.Redlock.LockError);
    const extended = await lock.extend(3_000);
    expect(extended.expiration).toBeGreaterThan(Date.now() + 2_000);
    await extended.unlock();
    const next = await once.lock(resource, 2_000);
    await redlock.unlock(next);
    await expect(redlock.unlock(next)).rejects.toBeInstanceOf(subject.Redlock.LockError);
  });

  it('lock and unlock take node-style callbacks', async () => {
    type Callback<T> = (error: Error | null, value?: T) => void;
    const withCallbacks = redlock as unknown as {
      lock(resource: string, ttl: number, callback: Callback<V4Lock>): unknown;
    };
    const resource = uniqueKey('redlock-v4-cb').replace(/\//g, ':');
    const lock = await new Promise<V4Lock>((resolve, reject) =>
      withCallbacks.lock(resource, 2_000, (error, value) =>
        error ? reject(error) : resolve(value as V4Lock),
      ),
    );
    await new Promise<void>((resolve, reject) =>
      (lock as unknown as { unlock(callback: Callback<void>): unknown }).unlock((error) =>
        error ? reject(error) : resolve(),
      ),
    );
    const again = await once.lock(resource, 2_000); // free again
    await again.unlock();
  });
});
