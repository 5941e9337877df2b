import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fenceKeyOf } from '../../adapters/redis/classic-scripts.js';
import * as semaphores from '../../src/compat/redis-semaphore/index.js';
import { ExecutionError, Redlock } from '../../src/compat/redlock/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

// The facades on the originals' own keys (redlock's and redis-semaphore's layouts) keep fencekit's
// rules: tokens never fall below one already given, no grant is handed out lost, every call has a
// deadline, and retries stop once the lock's keys are gone. Each case failed on the facades before
// these rules were added to them (see the comment of each).

let redis: ServerGroup;
let hosts: string[];
const clients: Redis[] = [];
const proxies: FaultProxy[] = [];

/** A client of instance i, straight or through a proxy the test can slow down or partition. */
const client = (i = 0) => {
  const made = new Redis(`redis://${hosts[i]}`, { maxRetriesPerRequest: 1 });
  made.on('error', () => undefined); // a proxy cut or a down instance: the calls say so
  clients.push(made);
  return made;
};
const through = (proxy: FaultProxy) => {
  const made = new Redis(proxy.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  made.on('error', () => undefined); // a proxy cut or a down instance: the calls say so
  clients.push(made);
  return made;
};
/** A client of an instance that is down: nothing listens on its port, so every call fails at once. */
const down = () => {
  const made = new Redis(1, '127.0.0.1', {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  made.on('error', () => undefined); // a proxy cut or a down instance: the calls say so
  clients.push(made);
  return made;
};
const proxy = async (i = 0) => {
  const [host = '', port = ''] = (hosts[i] ?? '').split(':');
  const made = await FaultProxy.start({ host, port: Number(port) });
  proxies.push(made);
  return made;
};

beforeAll(async () => {
  redis = await startServers('redis', { size: 3, faults: true });
  hosts = endpoint(redis, 'REDIS_HOSTS').split(',');
}, 60_000);
afterEach(async () => {
  for (const made of clients.splice(0)) made.disconnect();
  await Promise.allSettled(proxies.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  await redis?.stop();
});

describe("fencing tokens on the originals' layouts never fall below one given", () => {
  // Before: a majority's token was the largest of its counters, none raised; a later majority
  // without the instance that gave it counted from its own, lower counters.
  it('redlock, several clients: a later majority without the instance that gave the token counts above it', async () => {
    const k = uniqueKey('classic-fence');
    const ahead = 5n * 10n ** 15n; // below 2^53 (Lua counts in doubles), above any clock-started counter; one instance's counter far ahead (its clock, or grants of another majority)
    await client(1).set(fenceKeyOf(k), ahead.toString());
    // The first majority must include that instance (A is down), the second must not (B is down).
    const withoutA = new Redlock([down(), client(1), client(2)], { retryCount: 0 });
    const first = await withoutA.acquire([k], 5_000);
    expect(first.fencingToken).toBeGreaterThan(ahead);
    await first.release().catch(() => undefined); // the down instance votes against
    const withoutB = new Redlock([client(0), down(), client(2)], { retryCount: 0 });
    const second = await withoutB.acquire([k], 5_000);
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken ?? Number.POSITIVE_INFINITY);
    await second.release().catch(() => undefined); // the down instance votes against
  });

  it('RedlockMutex: the same, on redis-semaphore keys', async () => {
    const k = uniqueKey('classic-fence');
    const ahead = 5n * 10n ** 15n;
    await client(1).set(fenceKeyOf(`mutex:${k}`), ahead.toString());
    const first = new semaphores.RedlockMutex([down(), client(1), client(2)], k, { refreshInterval: 0 });
    await first.acquire();
    const token = first.fencingToken ?? 0n;
    expect(token).toBeGreaterThan(ahead);
    await first.release();
    const second = new semaphores.RedlockMutex([client(0), down(), client(2)], k, { refreshInterval: 0 });
    await second.acquire();
    expect(second.fencingToken).toBeGreaterThan(token);
    await second.release();
  });

  // Before: a refresh read the counter; one found missing answered '0', which the facade took for
  // "the key is not ours": the holder was told its lock was lost while it still held it.
  it('Mutex: a counter key lost while held starts again above the tokens it gave; the holder keeps its lock', async () => {
    const k = uniqueKey('classic-fence');
    const raw = client();
    const lost: Error[] = [];
    const mutex = new semaphores.Mutex(client(), k, {
      lockTimeout: 5_000,
      refreshInterval: 100,
      onLockLost: (error) => lost.push(error),
    });
    await mutex.acquire();
    const token = mutex.fencingToken ?? 0n;
    await raw.del(fenceKeyOf(`mutex:${k}`));
    await eventually(
      'a refresh found the counter missing and started it again',
      async () => (await raw.exists(fenceKeyOf(`mutex:${k}`))) === 1,
    );
    expect(mutex.isAcquired).toBe(true);
    expect(lost).toEqual([]);
    await mutex.release();
    const next = new semaphores.Mutex(client(), k, { refreshInterval: 0 });
    await next.acquire();
    expect(next.fencingToken).toBeGreaterThan(token);
    await next.release();
  });
});

describe('no grant is handed out lost', () => {
  // Before: redlock's acquire answered with a lock whose expiration had passed while its answers
  // travelled (counted from the call's start); redis-semaphore's reported an acquired lock that was
  // already lost.
  it('redlock: an answer later than the duration is no grant; its key is given back', async () => {
    const slow = await proxy();
    // 100 ms each way: the answers come after half the duration, when the keys' validity (less the
    // round trip) has passed; slower still, the call's deadline (the duration) ends the attempt.
    slow.setMode({ kind: 'latency', ms: 100 });
    const k = uniqueKey('born-lost');
    const redlock = new Redlock([through(slow)], { retryCount: 0 });
    const outcome = await redlock.acquire([k], 300).then(
      (lock) => ({ expired: lock.expiration <= Date.now() }),
      (error: unknown) => error,
    );
    expect(outcome).toBeInstanceOf(ExecutionError);
    slow.setMode({ kind: 'pass' });
    await eventually('the key is gone', async () => (await client().exists(k)) === 0);
  });

  it('Mutex: an answer later than lockTimeout is no grant: acquire times out', async () => {
    const slow = await proxy();
    slow.setMode({ kind: 'latency', ms: 100 });
    const mutex = new semaphores.Mutex(through(slow), uniqueKey('born-lost'), {
      lockTimeout: 300,
      acquireTimeout: 1_000,
      acquireAttemptsLimit: 2,
    });
    // Late answers: no grant (false); no answer within lockTimeout: the call's deadline rejects.
    const outcome = await mutex.tryAcquire().catch((error: { code?: string }) => error.code);
    expect([false, 'BACKEND_UNAVAILABLE']).toContain(outcome);
    expect(mutex.isAcquired).toBe(false);
  });
});

describe('every call has a deadline', () => {
  // Before: a call waited for every client's answer without a limit: a partitioned instance hung
  // acquire, release and quit() for good.
  it('redlock: a partitioned instance among three does not hold up acquire or release', async () => {
    const cut = await proxy(1);
    const redlock = new Redlock([client(0), through(cut), client(2)], { retryCount: 0 });
    await redlock.acquire([uniqueKey('warm')], 1_000).then((l) => l.release()); // the proxied connection is up
    cut.setMode({ kind: 'partition' });
    const lock = await redlock.acquire([uniqueKey('deadline')], 10_000);
    expect(lock.fencingToken).toBeGreaterThan(0n);
    await expect(lock.release()).resolves.toBeDefined();
  }, 30_000);

  it('redlock: a partitioned single instance: acquire rejects, and quit() ends', async () => {
    const cut = await proxy();
    const redlock = new Redlock([through(cut)], { retryCount: 1, retryDelay: 10 });
    await redlock.acquire([uniqueKey('warm')], 1_000).then((l) => l.release());
    cut.setMode({ kind: 'partition' });
    await expect(redlock.acquire([uniqueKey('deadline')], 1_000)).rejects.toBeInstanceOf(ExecutionError);
    await redlock.quit();
  }, 30_000);

  it('Mutex: a partitioned server: acquire rejects with BACKEND_UNAVAILABLE', async () => {
    const cut = await proxy();
    const mutex = new semaphores.Mutex(through(cut), uniqueKey('deadline'), {
      lockTimeout: 1_000,
      acquireTimeout: 60_000,
    });
    await mutex.acquire();
    await mutex.release();
    cut.setMode({ kind: 'partition' });
    await expect(mutex.acquire()).rejects.toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
  }, 30_000);

  it('Mutex: refreshes that get no answer end in the loss signal and onLockLost, not a hang', async () => {
    const cut = await proxy();
    const lost: Error[] = [];
    const mutex = new semaphores.Mutex(through(cut), uniqueKey('deadline'), {
      lockTimeout: 1_000,
      refreshInterval: 200,
      onLockLost: (error) => lost.push(error),
    });
    await mutex.acquire();
    const signal = mutex.signal;
    cut.setMode({ kind: 'partition' });
    await eventually('the loss is reported', async () => lost.length === 1, 20_000);
    expect(signal?.aborted).toBe(true);
    expect(mutex.isAcquired).toBe(false);
  }, 30_000);

  it('Mutex: an abort ends an acquire whose call hangs, with the signal’s reason', async () => {
    const cut = await proxy();
    const mutex = new semaphores.Mutex(through(cut), uniqueKey('deadline'), {
      lockTimeout: 30_000,
      acquireTimeout: 60_000,
    });
    await mutex.acquire();
    await mutex.release();
    cut.setMode({ kind: 'partition' });
    const controller = new AbortController();
    const acquiring = mutex.acquire(controller.signal);
    setTimeout(() => controller.abort(new Error('stop waiting')), 200);
    await expect(acquiring).rejects.toThrow('stop waiting');
  }, 30_000);
});

describe("retries stop once the lock's keys are gone", () => {
  // Before: with retryCount -1 a release or an extend of a lock whose key was gone retried forever.
  it('redlock, retryCount -1: the release of a lock whose key vanished rejects by its expiration', async () => {
    const k = uniqueKey('retry-stop');
    const redlock = new Redlock([client()], { retryCount: -1, retryDelay: 50, retryJitter: 0 });
    const lock = await redlock.acquire([k], 1_000);
    await client().del(k);
    await expect(lock.release()).rejects.toBeInstanceOf(ExecutionError);
  }, 30_000);

  it('redlock, retryCount -1: the extend of a lock whose key vanished rejects by its expiration', async () => {
    const k = uniqueKey('retry-stop');
    const redlock = new Redlock([client()], { retryCount: -1, retryDelay: 50, retryJitter: 0 });
    const lock = await redlock.acquire([k], 1_000);
    await client().del(k);
    await expect(lock.extend(1_000)).rejects.toBeInstanceOf(ExecutionError);
  }, 30_000);
});

describe("quit() on redlock's layout", () => {
  // Before: quit() sent QUIT before the cancelled acquire gave its keys back, so a lock nobody held
  // stayed set for its whole duration on every instance that had granted it.
  it('an acquire cut short by quit() gives its keys back before the clients quit', async () => {
    const k = uniqueKey('quit-give-back');
    const slow = await proxy();
    slow.setMode({ kind: 'latency', ms: 150 });
    const redlock = new Redlock([through(slow)], { retryCount: 0 });
    const acquiring = redlock.acquire([k], 30_000).then(
      () => 'granted',
      (error: Error) => error.name,
    );
    await eventually('the SET reached the server', async () => (await client().exists(k)) === 1, 10_000);
    await redlock.quit();
    expect(await acquiring).toBe('ExecutionError');
    await eventually('the key was given back', async () => (await client().exists(k)) === 0, 10_000);
  }, 30_000);

  // Before: after quit() the extension that using() retries failed at once and was retried in the
  // same turn until the lock's expiration: the event loop froze for that long.
  it('using(): after quit() the automatic extension stops instead of spinning the event loop', async () => {
    const k = uniqueKey('quit-using');
    const redlock = new Redlock([client()], { retryCount: 0, automaticExtensionThreshold: 1_500 });
    let longestGapMs = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 10);
    try {
      await redlock
        .using([k], 2_000, async (signal) => {
          await redlock.quit();
          await eventually('the routine is told the lock is gone', async () => signal.aborted, 10_000);
        })
        .catch(() => undefined); // the final release finds the clients quit
    } finally {
      clearInterval(ticker);
    }
    // A spin lasts until the lock's expiration (about 2 s here); ticks of a loaded machine do not.
    expect(longestGapMs).toBeLessThan(1_000);
  }, 30_000);
});
