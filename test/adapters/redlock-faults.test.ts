import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedlockProvider } from '../../adapters/redis/index.js';
import { lockKeys } from '../../adapters/redis/scripts.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

/** Fault stories of the Redlock adapter (issue 14) on 3 real redis-server processes. */
describe('Redlock under faults', () => {
  let redis: ServerGroup;
  let hosts: string[];
  let raws: Redis[];
  const providers: RedlockProvider[] = [];
  const proxies: FaultProxy[] = [];
  const open = (instances = hosts, options: { callTimeoutMs?: number } = {}) => {
    const provider = new RedlockProvider({ instances: instances.map((h) => `redis://${h}`), ...options });
    providers.push(provider);
    return provider;
  };
  const behindProxies = async () =>
    Promise.all(
      hosts.map(async (h) => {
        const [host = '', port = ''] = h.split(':');
        const started = await FaultProxy.start({ host, port: Number(port) });
        proxies.push(started);
        return started;
      }),
    );
  const settle = async (call: () => Promise<unknown>) => {
    const started = performance.now();
    const outcome = await call().then(
      () => 'resolved',
      (error: { code?: string }) => error.code ?? String(error),
    );
    return { ms: Math.round(performance.now() - started), outcome };
  };
  beforeAll(async () => {
    redis = await startServers('redis', { size: 3, faults: true });
    hosts = endpoint(redis, 'REDIS_HOSTS').split(',');
    raws = hosts.map((h) => new Redis(`redis://${h}`));
  });
  afterAll(async () => {
    for (const member of redis?.members ?? []) await member.resume();
    await Promise.allSettled(providers.map((p) => p.close()));
    await Promise.allSettled(proxies.map((p) => p.close()));
    for (const r of raws ?? []) r.disconnect();
    await redis?.stop();
  });

  it('14.5: a tryAcquire no instance answered in time leaves no grant behind', async () => {
    const slow = await behindProxies();
    const late = open(
      slow.map((p) => p.address),
      { callTimeoutMs: 200 },
    );
    const key = uniqueKey('orphan');
    await late.inspect(key); // connected and scripts loaded before the fault
    for (const p of slow) p.setMode({ kind: 'latency', ms: 500 });
    const trying = await settle(() => late.tryAcquire(key, { ttlMs: 15_000 }));
    expect(trying.outcome).toBe('BACKEND_UNAVAILABLE');
    // The late requests run on every instance (the proxies hold each byte 500 ms; a busy machine's
    // timers fire later): the orphan grants this test is about.
    const fencesNow = () => Promise.all(raws.map((r) => r.get(lockKeys('fencekit:', key).fence)));
    await eventually(
      'the late requests reached every instance',
      async () => (await fencesNow()).every((f) => f !== null),
      10_000,
    );
    for (const p of slow) p.setMode({ kind: 'pass' });
    const fences = await fencesNow();
    const next = await settle(async () => (await open().acquire(key, { waitMs: 20_000 })).release());
    console.log(
      `tryAcquire settled after ${trying.ms} ms (${trying.outcome}); fences after it ${fences}; the next client waited ${next.ms} ms`,
    );
    expect(fences.every((f) => f !== null)).toBe(true); // the late requests did grant on every instance
    expect(next.outcome).toBe('resolved');
    expect(next.ms).toBeLessThan(5_000);
  });

  it('14.5: an instance that answers too late while the others refuse keeps no orphan grant', async () => {
    const slow = await behindProxies();
    const late = open([slow[0]?.address as string, hosts[1] as string, hosts[2] as string], {
      callTimeoutMs: 200,
    });
    const key = uniqueKey('minority-orphan');
    const keys = lockKeys('fencekit:', key);
    await late.inspect(key); // connected and scripts loaded before the fault
    // Someone holds the key on instances 1 and 2 (a majority); instance 0 is free but slow.
    for (const r of raws.slice(1)) await r.set(keys.lock, 'H 1 0 ', 'PX', 60_000);
    slow[0]?.setMode({ kind: 'delay', direction: 'toClient', ms: 500 }); // late replies from instance 0
    const trying = await settle(async () => expect(await late.tryAcquire(key, { ttlMs: 15_000 })).toBeNull());
    // The late reply comes 500 ms after the grant on instance 0, later on a busy machine: its grant
    // must be given back well before its 15 s TTL would end it.
    await eventually(
      'instance 0 holds no orphan grant',
      async () => (await raws[0]?.pttl(keys.lock)) === -2,
      10_000,
    );
    const orphan = await raws[0]?.pttl(keys.lock);
    console.log(`tryAcquire → null after ${trying.ms} ms; instance 0's lock key pttl afterwards: ${orphan}`);
    expect(trying.outcome).toBe('resolved');
    expect(orphan).toBe(-2); // no key: the late grant was given back
  });

  it('14.10: inspect with a minority down reports the holder’s token when counters diverge', async () => {
    const provider = open();
    const key = uniqueKey('diverged');
    // Instance 0 counted further than the others.
    for (const [i, r] of raws.entries()) await r.set(lockKeys('fencekit:', key).fence, i === 0 ? '5' : '1');
    const lock = await provider.acquire(key, { ttlMs: 10_000 });
    expect(lock.fencingToken).toBe(6n);
    const first = redis.members[0];
    await first?.pause();
    try {
      const info = await provider.inspect(key);
      console.log(
        `holder has ${lock.fencingToken}; inspect with instance 0 paused says ${info?.holder?.fencingToken}`,
      );
      expect(info?.holder?.fencingToken).toBe(lock.fencingToken);
    } finally {
      await first?.resume();
    }
    await lock.release();
    expect(await provider.inspect(key)).toBeNull();
  });

  it('a connected provider whose first answers are lost rides the outage through within waitMs', async () => {
    const links = await behindProxies();
    const waiter = open(
      links.map((p) => p.address),
      { callTimeoutMs: 300 },
    );
    // Connected, but nothing answered yet: this provider's first call is the waiting acquire.
    await eventually('the connections are ready', async () =>
      waiter.instances.every((redis) => redis.status === 'ready'),
    );
    const key = uniqueKey('first-answers-lost');
    const holder = await open().acquire(key, { ttlMs: 20_000 });
    for (const link of links) link.setMode({ kind: 'blackhole' });
    const waiting = waiter.acquire(key, { ttlMs: 5_000, waitMs: 20_000 }).then(
      (lock) => ({ lock, error: undefined }),
      (error: Error) => ({ lock: undefined, error }),
    );
    await new Promise((resolve) => setTimeout(resolve, 900)); // three call deadlines
    for (const link of links) link.setMode({ kind: 'pass' });
    await holder.release();
    const next = await waiting;
    expect(next.error).toBeUndefined();
    expect(next.lock?.fencingToken).toBeGreaterThan(holder.fencingToken);
    await next.lock?.release();
  });

  it('14.7: close() after an unconfirmed abort gives back the keys still ours on the instances', async () => {
    const cut = await behindProxies();
    const a = open(cut.map((p) => p.address));
    const key = uniqueKey('lost-then-close');
    const keys = lockKeys('fencekit:', key);
    const lock = await a.acquire(key, { ttlMs: 3_000 });
    for (const p of cut) p.setMode({ kind: 'partition' }); // renewals are held, not answered
    await new Promise<void>((resolve) => lock.signal.addEventListener('abort', () => resolve()));
    expect((lock.signal.reason as { reason?: string }).reason).toBe('unconfirmed');
    for (const p of cut) p.setMode({ kind: 'pass' }); // healed: the held renewals reach the instances
    await eventually('the late renewals ran', async () => {
      const ttls = await Promise.all(raws.map((r) => r.pttl(keys.lock)));
      return ttls.filter((t) => t > 2_000).length >= 2;
    });
    const closing = await settle(() => a.close());
    const left = await Promise.all(raws.map((r) => r.get(keys.lock)));
    console.log(
      `close() took ${closing.ms} ms; the keys afterwards: ${left.map((v) => v?.split(' ')[0] ?? 'gone')}`,
    );
    expect(left.filter((v) => v?.startsWith(`${lock.ownerToken} `))).toEqual([]);
  });
});
