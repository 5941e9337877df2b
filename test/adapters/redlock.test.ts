import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedlockProvider } from '../../adapters/redis/index.js';
import { connect } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

describe('Redlock on 3 real redis-server processes', () => {
  let redis: ServerGroup;
  let hosts: string[];
  const providers: RedlockProvider[] = [];
  const open = () => {
    const provider = new RedlockProvider({ instances: hosts.map((h) => `redis://${h}`) });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    redis = await startServers('redis', { size: 3, faults: true });
    hosts = endpoint(redis, 'REDIS_HOSTS').split(',');
  });
  afterAll(async () => {
    for (const member of redis?.members ?? []) await member.resume();
    await Promise.allSettled(providers.map((p) => p.close()));
    await redis?.stop();
  });

  it('connect("redlock://…") opens a Redlock provider', async () => {
    const provider = await connect(`redlock://${hosts.join(',')}`);
    try {
      expect(provider.backend).toBe('redlock');
      const lock = await provider.acquire(uniqueKey('connect'));
      expect(lock.held).toBe(true);
      await lock.release();
    } finally {
      await provider.close();
    }
  });

  it('one instance down: still grants; two down: fails with a clear error', async () => {
    const provider = open();
    const [first, second] = redis.members;
    await first?.pause(); // a hung instance: its commands time out
    try {
      const lock = await provider.acquire(uniqueKey('one-down'), { ttlMs: 2_000 });
      expect(lock.held).toBe(true);
      await lock.release();
      await second?.pause();
      // A waiting acquire rides through the outage until waitMs, then reports it.
      await expect(
        provider.acquire(uniqueKey('two-down'), { ttlMs: 2_000, waitMs: 1_000 }),
      ).rejects.toMatchObject({
        code: 'BACKEND_UNAVAILABLE',
        message: expect.stringMatching(/only 1 of 3 instances answered; a grant needs 2/),
      });
    } finally {
      await first?.resume();
      await second?.resume();
    }
  });

  it('tokens rise across grants that reach different majorities', async () => {
    const provider = open();
    const key = uniqueKey('majorities');
    const tokens: bigint[] = [];
    for (const down of [0, 1, 2, 0, 2]) {
      const member = redis.members[down];
      await member?.pause();
      try {
        const lock = await provider.acquire(key, { ttlMs: 2_000, waitMs: 5_000 });
        tokens.push(lock.fencingToken);
        await lock.release();
      } finally {
        await member?.resume();
      }
      // The resumed instance answers again (its backlog of timed-out calls drained) before the next pause.
      await eventually('all instances answer', async () =>
        (
          await Promise.all(
            provider.instances.map((r) =>
              r.ping().then(
                () => true,
                () => false,
              ),
            ),
          )
        ).every(Boolean),
      );
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as bigint);
  });
});
