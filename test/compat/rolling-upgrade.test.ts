import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as semaphoreFacade from '../../src/compat/redis-semaphore/index.js';
import { Redlock as RedlockFacade } from '../../src/compat/redlock/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// A rolling upgrade: some replicas still run the original library, others already run the facade,
// on the same Redis and the same lock names. Each side has its own Redis client (as two processes
// would), and they contend for one lock: no two holders may ever overlap, whichever library each
// runs, and every grant the facade makes carries a token above the facade's previous one.
//
// The originals are imported by package name: redlock 5.0.0-beta.2 (the project's dev dependency
// `redlock5`) and redis-semaphore 5.x. Without them installed the cases are skipped, saying so.

type Lib = Record<string, unknown>;
async function load(name: string): Promise<Lib | undefined> {
  try {
    return (await import(name)) as Lib;
  } catch {
    return undefined;
  }
}
const redlockOriginal = await load('redlock5');
const semaphoreOriginal = await load('redis-semaphore');

let redisServer: ServerGroup;
const clients: Redis[] = [];
const client = () => {
  const made = new Redis(endpoint(redisServer, 'REDIS_URL'));
  clients.push(made);
  return made;
};

beforeAll(async () => {
  redisServer = await startServers('redis');
}, 60_000);
afterAll(async () => {
  for (const made of clients) made.disconnect();
  await redisServer?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Who is inside the critical section now, checked on every entry: the limit is never exceeded.
 * Entries and exits run on this one event loop, so the count is exact.
 */
class Overlaps {
  inside = 0;
  most = 0;
  enter(): void {
    this.inside++;
    this.most = Math.max(this.most, this.inside);
  }
  leave(): void {
    this.inside--;
  }
}

/** Each worker's turns: take the lock, stay a moment, give it back. */
const TURNS = 12;

const missing = (name: string, lib: Lib | undefined) =>
  lib ? '' : ` (skipped: the package ${name} cannot be resolved; add it as a dev dependency)`;

describe.skipIf(!redlockOriginal)(
  `rolling upgrade: redlock 5.0.0-beta.2 and the redlock facade${missing('redlock5', redlockOriginal)}`,
  () => {
    it('a lock held by one side is refused to the other, in both directions', async () => {
      const Original = (redlockOriginal as { default: new (clients: Redis[], settings: object) => unknown })
        .default;
      type Taker = { acquire(r: string[], d: number): Promise<{ release(): Promise<unknown> }> };
      const once = { retryCount: 2, retryDelay: 20, retryJitter: 0 };
      const original = new Original([client()], once) as Taker;
      const facade = new RedlockFacade([client()], once) as unknown as Taker;
      const resource = uniqueKey('rolling-redlock').replace(/\//g, ':');
      const refused = (taker: Taker) =>
        taker.acquire([resource], 10_000).then(
          async (lock) => {
            await lock.release();
            return false;
          },
          () => true,
        );
      const heldByOriginal = await original.acquire([resource], 10_000);
      expect(await refused(facade)).toBe(true);
      await heldByOriginal.release();
      const heldByFacade = await facade.acquire([resource], 10_000);
      expect(await refused(original)).toBe(true);
      await heldByFacade.release();
    });

    it('an original holder and a facade holder never hold at once; the facade tokens rise', async () => {
      const Original = (redlockOriginal as { default: new (clients: Redis[], settings: object) => unknown })
        .default;
      const resource = uniqueKey('rolling-redlock').replace(/\//g, ':');
      const settings = { retryCount: -1, retryDelay: 5, retryJitter: 3 };
      type Taker = {
        acquire(r: string[], d: number): Promise<{ release(): Promise<unknown>; fencingToken?: bigint }>;
      };
      const originals = [0, 1].map(() => new Original([client()], settings) as Taker);
      const facades = [0, 1].map(() => new RedlockFacade([client()], settings) as unknown as Taker);
      const overlaps = new Overlaps();
      const tokens: bigint[] = [];
      const sides: string[] = [];
      const work = (taker: Taker, side: string) => async () => {
        for (let turn = 0; turn < TURNS; turn++) {
          const lock = await taker.acquire([resource], 10_000);
          overlaps.enter();
          sides.push(side);
          if (lock.fencingToken !== undefined) tokens.push(lock.fencingToken);
          await sleep(2);
          overlaps.leave();
          await lock.release();
        }
      };
      await Promise.all([
        ...originals.map((taker) => work(taker, 'original')()),
        ...facades.map((taker) => work(taker, 'facade')()),
      ]);
      expect(overlaps.most).toBe(1);
      expect(sides.filter((side) => side === 'original')).toHaveLength(2 * TURNS);
      const switches = sides.filter((side, i) => i > 0 && side !== sides[i - 1]).length;
      expect(switches, 'the two sides took turns with each other').toBeGreaterThan(0);
      expect(tokens).toHaveLength(2 * TURNS);
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as bigint);
    }, 60_000);
  },
);

describe.skipIf(!semaphoreOriginal)(
  `rolling upgrade: redis-semaphore and its facade${missing('redis-semaphore', semaphoreOriginal)}`,
  () => {
    type Holder = { acquire(): Promise<void>; release(): Promise<void>; fencingToken?: bigint };
    type Make = (lib: Lib, redis: Redis, key: string, options?: object) => Holder;
    const patient = { acquireTimeout: 30_000, retryInterval: 5, lockTimeout: 5_000 };
    /** Gives up after 200 ms. */
    const brief = { ...patient, acquireTimeout: 200 };
    const shapes: Array<{ kind: string; limit: number; make: Make }> = [
      {
        kind: 'Mutex',
        limit: 1,
        make: (lib, redis, key, options = patient) =>
          new (lib.Mutex as new (c: Redis, k: string, o: object) => Holder)(redis, key, options),
      },
      {
        kind: 'Semaphore (limit 2)',
        limit: 2,
        make: (lib, redis, key, options = patient) =>
          new (lib.Semaphore as new (c: Redis, k: string, l: number, o: object) => Holder)(
            redis,
            key,
            2,
            options,
          ),
      },
      {
        kind: 'MultiSemaphore (2 of 4 permits)',
        limit: 2,
        make: (lib, redis, key, options = patient) =>
          new (lib.MultiSemaphore as new (c: Redis, k: string, l: number, p: number, o: object) => Holder)(
            redis,
            key,
            4,
            2,
            options,
          ),
      },
    ];

    it.each(shapes)(
      '$kind: a full lock is refused to the other side, in both directions',
      async ({ limit, make }) => {
        const key = uniqueKey('rolling-semaphore').replace(/\//g, ':');
        for (const [holding, asking] of [
          [semaphoreOriginal, semaphoreFacade],
          [semaphoreFacade, semaphoreOriginal],
        ] as Lib[][]) {
          const redis = client();
          const holders = Array.from({ length: limit }, () => make(holding as Lib, redis, key));
          for (const holder of holders) await holder.acquire();
          const other = make(asking as Lib, client(), key, brief) as Holder & {
            tryAcquire(): Promise<boolean>;
          };
          expect(await other.tryAcquire()).toBe(false);
          for (const holder of holders) await holder.release();
          expect(await other.tryAcquire()).toBe(true);
          await other.release();
        }
      },
    );

    it.each(shapes)(
      '$kind: original and facade holders together never exceed the limit; the facade tokens rise',
      async ({ limit, make }) => {
        const key = uniqueKey('rolling-semaphore').replace(/\//g, ':');
        const overlaps = new Overlaps();
        const tokens: bigint[] = [];
        const work = (lib: Lib) => async () => {
          const redis = client();
          for (let turn = 0; turn < TURNS; turn++) {
            const holder = make(lib, redis, key); // an object per use, as apps do
            await holder.acquire();
            overlaps.enter();
            if (holder.fencingToken !== undefined) tokens.push(holder.fencingToken);
            await sleep(2);
            overlaps.leave();
            await holder.release();
          }
        };
        const libs = [semaphoreOriginal, semaphoreOriginal, semaphoreFacade, semaphoreFacade] as Lib[];
        await Promise.all(libs.map((lib) => work(lib)()));
        expect(overlaps.most).toBeLessThanOrEqual(limit);
        expect(tokens).toHaveLength(2 * TURNS);
        // A mutex's tokens rise in grant order; a semaphore's are distinct (holders overlap).
        if (limit === 1) {
          for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as bigint);
        } else {
          expect(new Set(tokens).size).toBe(tokens.length);
        }
      },
      60_000,
    );
  },
);
