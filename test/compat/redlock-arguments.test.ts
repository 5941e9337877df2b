import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { ExecutionError, Redlock } from '../../src/compat/redlock/index.js';
import { InvalidArgumentError, MemoryLockProvider } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { longTimeout } from '../../src/timers.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

// The redlock facade refuses a duration or a setting it cannot honour (rather than computing a lock
// that never expires, or a wait that ends at once), and it says when the delete of a lock it held
// failed, as redlock's release does when it misses its quorum.

const key = () => uniqueKey('redlock-arguments').replace(/\//g, ':');

describe('redlock facade: durations and settings out of range are refused', () => {
  let memory: MemoryLockProvider;
  beforeAll(() => {
    memory = new MemoryLockProvider();
  });
  afterAll(() => memory.close());

  it.each([Number.NaN, Number.POSITIVE_INFINITY, -5, 0, 1.5, 2 ** 53])(
    'duration %s: acquire, using and extend reject with InvalidArgumentError',
    async (duration) => {
      const redlock = new Redlock(memory, { retryCount: 0 });
      await expect(redlock.acquire([key()], duration)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(redlock.using([key()], duration, async () => 'ran')).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
      const lock = await redlock.acquire([key()], 5_000);
      await expect(lock.extend(duration)).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(lock.expiration).toBeGreaterThan(Date.now()); // the refused extension changed nothing
      await lock.release();
    },
  );

  it.each([
    { driftFactor: Number.NaN },
    { driftFactor: -0.1 },
    { driftFactor: 1 },
    { retryCount: Number.NaN },
    { retryCount: -2 },
    { retryCount: 2.5 },
    { retryDelay: Number.NaN },
    { retryDelay: -1 },
    { retryDelay: Number.POSITIVE_INFINITY },
    { retryJitter: Number.NaN },
    { retryJitter: -1 },
    { automaticExtensionThreshold: Number.NaN },
    { automaticExtensionThreshold: -1 },
  ])('setting %o: refused by the constructor and per call', async (settings) => {
    expect(() => new Redlock(memory, settings)).toThrow(InvalidArgumentError);
    const redlock = new Redlock(memory, { retryCount: 0 });
    await expect(redlock.acquire([key()], 5_000, settings)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(redlock.using([key()], 5_000, settings, async () => 'ran')).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
  });

  it('settings in range are taken (retryCount -1 and Infinity: no limit)', async () => {
    for (const retryCount of [-1, Number.POSITIVE_INFINITY, 0, 3]) {
      const redlock = new Redlock(memory, { retryCount, retryDelay: 0, retryJitter: 0, driftFactor: 0 });
      const lock = await redlock.acquire([key()], 5_000);
      await lock.release();
    }
  });

  it('a NaN timer delay is refused, not fired at once', async () => {
    let fired = false;
    expect(() => longTimeout(() => (fired = true), Number.NaN)).toThrow(InvalidArgumentError);
    await new Promise((r) => setTimeout(r, 50));
    expect(fired).toBe(false);
  });
});

describe('redlock facade on Redis: a delete that fails is reported', () => {
  let server: ServerGroup;
  let target: { host: string; port: number };
  beforeAll(async () => {
    server = await startServers('redis');
    const [host = '', port = ''] = endpoint(server, 'REDIS_HOSTS').split(',')[0]?.split(':') ?? [];
    target = { host, port: Number(port) };
  }, 60_000);
  afterAll(() => server?.stop());

  /** A provider through a proxy; `refuse` makes Redis refuse its connections until `heal`. */
  async function cutOff() {
    const proxy = await FaultProxy.start(target);
    const provider = new RedisLockProvider({ url: `redis://${proxy.address}`, callTimeoutMs: 300 });
    return {
      redlock: new Redlock(provider, { retryCount: 0 }),
      refuse: () => proxy.setMode({ kind: 'refuse' }),
      close: async () => {
        proxy.setMode({ kind: 'pass' });
        await provider.close().catch(() => undefined); // its connections were reset
        await proxy.close();
      },
    };
  }

  it('release() of a held lock rejects with ExecutionError when Redis refuses the delete', async () => {
    const { redlock, refuse, close } = await cutOff();
    try {
      const lock = await redlock.acquire([key()], 30_000);
      refuse();
      await expect(lock.release()).rejects.toBeInstanceOf(ExecutionError);
    } finally {
      await close();
    }
  });

  it('a lock that gives itself back at its expiration while Redis refuses rejects nothing unhandled', async () => {
    const { redlock, refuse, close } = await cutOff();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const lock = await redlock.acquire([key()], 1_500);
      refuse();
      await new Promise((r) => setTimeout(r, 2_500)); // expired: its delete failed
      expect(unhandled).toEqual([]);
      await expect(lock.release()).rejects.toBeInstanceOf(ExecutionError); // no longer held
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await close();
    }
  });

  it('using() rejects with ExecutionError when the final delete fails, not with the routine value', async () => {
    const { redlock, refuse, close } = await cutOff();
    try {
      const outcome = redlock.using([key()], 30_000, async () => {
        refuse();
        return 'done';
      });
      await expect(outcome).rejects.toBeInstanceOf(ExecutionError);
    } finally {
      await close();
    }
  });
});
