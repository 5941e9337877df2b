import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { LockScripts, lockKeys } from '../../adapters/redis/scripts.js';
import { connect, type Lock, type LockLostError } from '../../src/index.js';
import { sleep } from '../../src/testing/helpers.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const root = resolve(import.meta.dirname, '../..');

/** The storage side for the process story: a value that only takes writes with a token ≥ the last one. */
const FENCED_SET = `
local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[2]) < last then return 0 end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'token', ARGV[2])
return 1`;

describe('Redis adapter on a real server', () => {
  let server: ServerGroup;
  let url: string;
  let raw: Redis;
  const providers: RedisLockProvider[] = [];
  const open = (options: Partial<ConstructorParameters<typeof RedisLockProvider>[0]> = {}) => {
    const provider = new RedisLockProvider({ url, ...options });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    server = await startServers('redis');
    url = endpoint(server, 'REDIS_URL');
    raw = new Redis(url);
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    raw?.disconnect();
    await server?.stop();
  });

  it('connect("redis://…") opens a provider; inspect shows owner, token and remaining TTL', async () => {
    const provider = await connect(`${url}/0?prefix=app:`);
    try {
      expect(provider.backend).toBe('redis');
      const key = uniqueKey('connect');
      const lock = await provider.acquire(key, { ttlMs: 5_000, owner: 'worker-7' });
      const info = await provider.inspect(key);
      expect(info?.holder).toMatchObject({ owner: 'worker-7', fencingToken: lock.fencingToken });
      expect(info?.holder?.expiresAt?.getTime()).toBeGreaterThan(Date.now());
      // The lock key alone says who holds it: "ownerToken token since owner".
      expect(await raw.get(`app:{${key}}:lock`)).toMatch(
        new RegExp(`^${lock.ownerToken} ${lock.fencingToken} \\d+ worker-7$`),
      );
      await lock.release();
      expect(await raw.exists(`app:{${key}}:lock`)).toBe(0);
    } finally {
      await provider.close();
    }
  });

  it('watchdog: a job far longer than the TTL keeps the lock', async () => {
    const provider = open();
    const key = uniqueKey('watchdog');
    const lock = await provider.acquire(key, { ttlMs: 300 });
    await new Promise((r) => setTimeout(r, 2_000)); // ~7 TTLs
    expect(lock.held).toBe(true);
    expect(await raw.pttl(`fencekit:{${key}}:lock`)).toBeGreaterThan(0);
    await lock.release();
  });

  it('renewals cut off: the signal aborts while the key still exists in Redis', async () => {
    const [host = '', port = ''] = endpoint(server, 'REDIS_HOSTS').split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const provider = open({ url: `redis://${proxy.address}`, callTimeoutMs: 300 });
      const key = uniqueKey('cut-off');
      const lock = await provider.acquire(key, { ttlMs: 1_000 });
      let pttlAtAbort = -1;
      const aborted = new Promise<void>((ok) =>
        lock.signal.addEventListener('abort', () => {
          void raw.pttl(`fencekit:{${key}}:lock`).then((pttl) => {
            pttlAtAbort = pttl;
            ok();
          });
        }),
      );
      proxy.setMode({ kind: 'blackhole' });
      await aborted;
      expect((lock.signal.reason as LockLostError).reason).toBe('unconfirmed');
      expect(pttlAtAbort).toBeGreaterThan(0); // told before the key could expire
    } finally {
      await proxy.close();
    }
  });

  it('lost reply: the acquire that reached Redis is adopted, no wait for our own orphan', async () => {
    const [host = '', port = ''] = endpoint(server, 'REDIS_HOSTS').split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      // Deadlines far from what the test tells apart: adopted at once, against a 30 s TTL.
      const provider = open({ url: `redis://${proxy.address}`, callTimeoutMs: 2_000 });
      const key = uniqueKey('lost-reply');
      await provider.inspect(key); // connected and scripts loaded before the fault
      proxy.cutAfterRequest((chunk) => chunk.includes(`{${key}}:lock`) && /EVAL/i.test(chunk.toString()));
      const started = performance.now();
      const lock = await provider.acquire(key, { ttlMs: 30_000, waitMs: 20_000 });
      expect(performance.now() - started).toBeLessThan(15_000); // not after the 30 s TTL
      expect(proxy.accepted).toBeGreaterThan(1); // the connection was cut and re-opened
      expect(await raw.get(`fencekit:{${key}}:lock`)).toMatch(
        new RegExp(`^${lock.ownerToken} ${lock.fencingToken} `),
      );
      expect(await raw.get(`fencekit:{${key}}:fence`)).toBe(String(lock.fencingToken)); // one INCR only
      await lock.release();
    } finally {
      await proxy.close();
    }
  });

  it('fair: a releaser that asks again at once waits behind the waiter already queued', async () => {
    const [a, b] = [open(), open()];
    const key = uniqueKey('fair');
    let lock = await a.acquire(key, { ttlMs: 5_000 });
    const winners: string[] = [];
    const bLoop = (async () => {
      for (let i = 0; i < 5; i++) {
        const l = await b.acquire(key, { ttlMs: 5_000, waitMs: 5_000 });
        winners.push('b');
        await l.release();
      }
    })();
    for (let i = 0; i < 5; i++) {
      await eventually('b queued', async () => (await a.inspect(key))?.waiters === 1);
      await lock.release();
      lock = await a.acquire(key, { ttlMs: 5_000, waitMs: 5_000 });
      winners.push('a');
    }
    await lock.release();
    await bLoop;
    expect(winners.slice(0, 9)).toEqual(['b', 'a', 'b', 'a', 'b', 'a', 'b', 'a', 'b']);
  });

  it('fair: when a crashed holder’s key expires (no notice), the first waiter wins', async () => {
    for (let round = 0; round < 3; round++) {
      const holder = open();
      const waiters = [open(), open(), open(), open()];
      const key = uniqueKey('expiry-order');
      await holder.acquire(key, { ttlMs: 500 });
      const winners: number[] = [];
      const all = waiters.map((w, i) =>
        (async () => {
          await new Promise((r) => setTimeout(r, i * 30));
          const l = await w.acquire(key, { ttlMs: 5_000, waitMs: 10_000 });
          winners.push(i);
          await l.release();
        })(),
      );
      await eventually('all queued', async () => (await holder.inspect(key))?.waiters === 4);
      await holder.abandon();
      await Promise.all(all);
      expect(winners).toEqual([0, 1, 2, 3]);
    }
  });

  it('GC-pause story with real processes: a SIGSTOPped holder’s late write is rejected by fencing', async () => {
    const key = uniqueKey('sigstop');
    const child: ChildProcess = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { RedisLockProvider } from '${root}/dist/redis.js';
         import { createInterface } from 'node:readline';
         const p = new RedisLockProvider({ url: ${JSON.stringify(url)} });
         const lock = await p.acquire(${JSON.stringify(key)}, { ttlMs: 500 });
         console.log('held ' + lock.fencingToken);
         for await (const line of createInterface({ input: process.stdin })) {
           // Resumed after the pause: write without looking at the signal, as the paused code would.
           const ok = await p.redis.eval(${JSON.stringify(FENCED_SET)}, 1, 'balance:' + ${JSON.stringify(key)}, 'A', String(lock.fencingToken));
           console.log('write ' + ok);
           process.exit(0);
         }`,
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    try {
      const lines: string[] = [];
      child.stdout?.on('data', (d: Buffer) => lines.push(...d.toString().trim().split('\n')));
      await eventually('child holds the lock', async () => lines.some((l) => l.startsWith('held ')));
      const childToken = BigInt((lines[0] as string).split(' ')[1] as string);
      child.kill('SIGSTOP'); // a stop-the-world pause: no renewals go out
      const b = open();
      const lock = await b.acquire(key, { ttlMs: 5_000, waitMs: 5_000 });
      expect(lock.fencingToken).toBeGreaterThan(childToken);
      expect(await raw.eval(FENCED_SET, 1, `balance:${key}`, 'B', String(lock.fencingToken))).toBe(1);
      child.kill('SIGCONT');
      child.stdin?.write('go\n');
      await eventually('child wrote', async () => lines.some((l) => l.startsWith('write ')));
      expect(lines).toContain('write 0'); // rejected: its token is older than B's
      expect(await raw.hget(`balance:${key}`, 'value')).toBe('B');
      await lock.release();
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  });

  it('non-fair mode: any waiter may win; the queue still counts waiters', async () => {
    const [a, b] = [open({ fair: false }), open({ fair: false })];
    const key = uniqueKey('unfair');
    const lock = await a.acquire(key);
    const waiting = b.acquire(key, { waitMs: 5_000 });
    await eventually('queued', async () => (await a.inspect(key))?.waiters === 1);
    await lock.release();
    const next: Lock = await waiting;
    expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
    await next.release();
  });

  describe('hand-over scripts (fair mode), step by step on the raw keys', () => {
    // Each waiter's notices go to its own channel (a provider's), here named after the waiter.
    const inbox = (name: string, ownerToken: string) => `test-inbox:${name}:${ownerToken}`;
    let scripts: LockScripts;
    beforeAll(() => {
      scripts = new LockScripts(raw.duplicate());
    });
    afterAll(() => scripts?.redis.disconnect());
    const queue = (name: string, ownerToken: string, ttlMs: number, waitedMs = 0) =>
      scripts.acquire(lockKeys('fencekit:', name), {
        ownerToken,
        ttlMs,
        owner: `owner-${ownerToken}`,
        wait: true,
        fair: true,
        waiterTtlMs: 5_000,
        channel: inbox(name, ownerToken),
        waitedMs,
      });

    it('release grants the first waiter with its own ttl and owner, and tells it the token', async () => {
      const name = uniqueKey('hand-over');
      const keys = lockKeys('fencekit:', name);
      const listener = raw.duplicate();
      const notices: string[] = [];
      listener.on('pmessage', (_pattern: string, channel: string, message: string) =>
        notices.push(`${channel}: ${message}`),
      );
      await listener.psubscribe(`test-inbox:${name}:*`);
      try {
        const first = await queue(name, 'A', 60_000);
        expect(typeof first).toBe('string');
        expect(await queue(name, 'B', 9_000)).toEqual([expect.any(Number), first]); // refused: [−pttl, fence]
        expect(await scripts.release(keys, 'A', true)).toBe(true);
        const held = (await raw.get(keys.lock)) as string;
        expect(held).toMatch(/^B (\d+) \d+ owner-B$/);
        const token = held.split(' ')[1];
        expect(BigInt(token as string)).toBe(BigInt(first as string) + 1n);
        // Provisional: no longer than B's place in the queue would have lived (waiter TTL 5 s).
        expect(await raw.pttl(keys.lock)).toBeGreaterThan(4_000);
        expect(await raw.pttl(keys.lock)).toBeLessThanOrEqual(5_000);
        expect(await raw.zcard(keys.queue)).toBe(0);
        await eventually('the notice', async () => notices.length === 1);
        expect(notices).toEqual([`${inbox(name, 'B')}: B ${token}`]); // to B only
        // B's next attempt adopts the grant (same token) and restarts its PX with its own ttl.
        expect(await queue(name, 'B', 9_000)).toBe(token);
        expect(await raw.pttl(keys.lock)).toBeGreaterThan(8_000);
      } finally {
        listener.disconnect();
      }
    });

    it('a waiter that leaves after being handed the key gives it back and hands it on', async () => {
      const name = uniqueKey('hand-back');
      const keys = lockKeys('fencekit:', name);
      for (const id of ['A', 'B', 'C']) await queue(name, id, 60_000);
      await scripts.release(keys, 'A', true);
      expect(await raw.get(keys.lock)).toMatch(/^B /);
      await scripts.leave(keys, 'B', true); // B's wait was cancelled as the key reached it
      expect(await raw.get(keys.lock)).toMatch(/^C /);
      expect(await raw.zcard(keys.queue)).toBe(0);
      await scripts.leave(keys, 'C', true);
      expect(await raw.exists(keys.lock)).toBe(0);
    });

    it('a place whose liveness entry is gone is dropped, not left at the head of the queue', async () => {
      const name = uniqueKey('dead-head');
      const keys = lockKeys('fencekit:', name);
      for (const id of ['A', 'B', 'C']) await queue(name, id, 60_000);
      await raw.zrem(keys.waiters, 'B'); // evicted or deleted by hand; B's place stays
      await scripts.release(keys, 'A', true);
      expect(await raw.get(keys.lock)).toMatch(/^C /);
      expect(await raw.zcard(keys.queue)).toBe(0);
      await scripts.release(keys, 'C', true);
    });

    it('a refusal on a name whose fence counter is gone says so (null), never 0', async () => {
      const name = uniqueKey('no-fence');
      const keys = lockKeys('fencekit:', name);
      await queue(name, 'A', 60_000);
      await raw.del(keys.fence); // evicted or deleted by hand while the lock key stays
      expect(await queue(name, 'B', 60_000)).toEqual([expect.any(Number), null]);
      await scripts.release(keys, 'A', true);
      await scripts.release(keys, 'B', true);
    });

    it('a server clock stepped back puts a later request behind those waiting, not ahead', async () => {
      const name = uniqueKey('clock-back');
      const keys = lockKeys('fencekit:', name);
      expect(typeof (await queue(name, 'A', 60_000))).toBe('string'); // holds
      await queue(name, 'B', 60_000);
      // B queued when the server's clock read an hour later than it reads now: then the clock
      // stepped back. Its arrival, and the last arrival time the queue used, lie an hour ahead.
      const [seconds, micros] = await raw.time();
      const hourAhead = (Number(seconds) + 3_600) * 1_000_000 + Number(micros);
      await raw.zadd(keys.queue, hourAhead, 'B');
      await raw.set(keys.arrivalClock, hourAhead, 'PX', 60_000);
      await queue(name, 'C', 60_000);
      await sleep(300);
      // D had waited 100 ms in its process: it was asked for after C queued, and goes behind it.
      await queue(name, 'D', 60_000, 100);
      expect(await raw.zrange(keys.queue, 0, -1)).toEqual(['B', 'C', 'D']);
      await scripts.release(keys, 'A', true);
      expect(await raw.get(keys.lock)).toMatch(/^B /);
      await scripts.release(keys, 'B', true);
      expect(await raw.get(keys.lock)).toMatch(/^C /);
      await scripts.release(keys, 'C', true);
      expect(await raw.get(keys.lock)).toMatch(/^D /);
      // The queue's clock went with its last place: a free name keeps only its fence counter.
      expect(await raw.exists(keys.arrivalClock)).toBe(0);
      await scripts.release(keys, 'D', true);
      expect(await raw.keys(`fencekit:{${name}}:*`)).toEqual([keys.fence]);
    });

    it('non-fair release only invites the first waiter to try', async () => {
      const name = uniqueKey('invite');
      const keys = lockKeys('fencekit:', name);
      await queue(name, 'A', 60_000);
      await queue(name, 'B', 60_000);
      await scripts.release(keys, 'A', false);
      expect(await raw.exists(keys.lock)).toBe(0);
      expect(await raw.zrange(keys.queue, 0, -1)).toEqual(['B']);
    });
  });
});
