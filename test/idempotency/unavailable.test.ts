import { describe, expect, it } from 'vitest';
import { BackendUnavailableError } from '../../src/errors.js';
import { createIdempotencyStore, IdempotencyInFlightError } from '../../src/idempotency/index.js';
import { FaultProxy } from '../servers/index.js';
import { useStoreServers } from './backends.js';

// A store that cannot be reached answers BackendUnavailableError within its call deadline and never
// runs fn; once the store answers again, each key runs exactly once.
const servers = useStoreServers();

const CALL_TIMEOUT_MS = 600;

const UNREACHABLE = {
  redis: 'redis://127.0.0.1:1',
  postgres: 'postgres://u@127.0.0.1:1/db',
  etcd: 'etcd://127.0.0.1:1',
};

describe.each(['redis', 'postgres', 'etcd'] as const)('idempotency store on %s, unreachable', (backend) => {
  it('a store that was never reachable fails with BackendUnavailableError and runs nothing', async () => {
    const url = UNREACHABLE[backend];
    const store = await createIdempotencyStore(url, { callTimeoutMs: CALL_TIMEOUT_MS });
    let runs = 0;
    const started = performance.now();
    const error = await store.run('k', 'p', () => runs++).catch((e: unknown) => e);
    const tookMs = performance.now() - started;
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect(tookMs).toBeLessThan(CALL_TIMEOUT_MS + 1_000);
    expect(runs).toBe(0);
    await store.close();
  });

  it('partitioned: BackendUnavailableError within the deadline, never a second run; after healing each key runs once', async () => {
    const target = new URL(servers.urls[backend]);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const viaProxy = servers.urls[backend].replace(`:${target.port}`, `:${proxy.port}`);
    const store = await createIdempotencyStore(viaProxy, { callTimeoutMs: CALL_TIMEOUT_MS });
    const runs = new Map<string, number>();
    const fn = (k: string) => async () => {
      runs.set(k, (runs.get(k) ?? 0) + 1);
      return `charged ${k}`;
    };
    const done = `done-${crypto.randomUUID()}`;
    const fresh = `fresh-${crypto.randomUUID()}`;
    try {
      expect(await store.run(done, 'p', fn(done))).toBe(`charged ${done}`);
      proxy.setMode({ kind: 'partition' });
      for (const k of [done, fresh]) {
        const started = performance.now();
        const error = await store.run(k, 'p', fn(k), { leaseMs: 1_000 }).catch((e: unknown) => e);
        expect(error, k).toBeInstanceOf(BackendUnavailableError);
        expect(performance.now() - started, k).toBeLessThan(CALL_TIMEOUT_MS + 500);
      }
      expect(runs.get(done)).toBe(1);
      expect(runs.get(fresh)).toBeUndefined();

      // Healing delivers the held begin of `fresh`: the server starts a run nobody will finish. A
      // repeat sees it in flight until its lease ends, then takes it over and runs once.
      // The first call after healing waits (waitMs): a client may still keep the server it just
      // lost apart for a moment (etcd3's breaker, 1 s), which is an outage to ride through.
      proxy.setMode({ kind: 'pass' });
      expect(await store.execute(done, 'p', fn(done), { waitMs: 5_000 })).toEqual({
        value: `charged ${done}`,
        replayed: true,
      });
      const retried = await store.run(fresh, 'p', fn(fresh), { waitMs: 5_000 });
      expect(retried).toBe(`charged ${fresh}`);
      expect(await store.run(fresh, 'p', fn(fresh))).toBe(`charged ${fresh}`);
      expect(runs.get(done)).toBe(1);
      expect(runs.get(fresh)).toBe(1);
    } finally {
      await store.close();
      await proxy.close();
    }
  }, 20_000);

  it('close() returns within callTimeoutMs + 1 s while the store is partitioned, failing the run in progress', async () => {
    const target = new URL(servers.urls[backend]);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const viaProxy = servers.urls[backend].replace(`:${target.port}`, `:${proxy.port}`);
    const store = await createIdempotencyStore(viaProxy, { callTimeoutMs: CALL_TIMEOUT_MS });
    try {
      await store.run(`warm-${crypto.randomUUID()}`, 'p', () => 'warm');
      proxy.setMode({ kind: 'partition' });
      const pending = store.run(`k-${crypto.randomUUID()}`, 'p', () => 'never').catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 50));
      const started = performance.now();
      await store.close();
      expect(performance.now() - started).toBeLessThan(CALL_TIMEOUT_MS + 1_000);
      expect(await pending).toMatchObject({ code: 'ABORTED' });
    } finally {
      proxy.setMode({ kind: 'pass' });
      await proxy.close();
    }
  }, 20_000);

  it('partitioned while fn runs, healed within the lease: the completion is retried and stored once', async () => {
    const target = new URL(servers.urls[backend]);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const viaProxy = servers.urls[backend].replace(`:${target.port}`, `:${proxy.port}`);
    const store = await createIdempotencyStore(viaProxy, { callTimeoutMs: CALL_TIMEOUT_MS });
    const k = `mid-run-${crypto.randomUUID()}`;
    let runs = 0;
    try {
      const heal = () => proxy.setMode({ kind: 'pass' });
      const value = await store.run(
        k,
        'p',
        () => {
          runs++;
          proxy.setMode({ kind: 'partition' }); // the completion's first attempt is held
          setTimeout(heal, CALL_TIMEOUT_MS + 300); // …and delivered late, after the store gave up on it
          return 'charged';
        },
        { leaseMs: 4_000 },
      );
      expect(value).toBe('charged');
      expect(await store.execute(k, 'p', () => ++runs)).toEqual({ value: 'charged', replayed: true });
      expect(runs).toBe(1);
    } finally {
      await store.close();
      await proxy.close();
    }
  }, 20_000);

  it('with waitMs a run rides through a short partition: its own held start is adopted, fn runs once', async () => {
    const target = new URL(servers.urls[backend]);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const viaProxy = servers.urls[backend].replace(`:${target.port}`, `:${proxy.port}`);
    const store = await createIdempotencyStore(viaProxy, { callTimeoutMs: CALL_TIMEOUT_MS });
    const k = `ride-${crypto.randomUUID()}`;
    let runs = 0;
    try {
      await store.run(`warm-${crypto.randomUUID()}`, 'p', () => 'warm');
      proxy.setMode({ kind: 'partition' });
      setTimeout(() => proxy.setMode({ kind: 'pass' }), CALL_TIMEOUT_MS + 400);
      // The lease (30 s) is far longer than waitMs: only adopting its own start lets the run finish.
      const outcome = await store
        .run(k, 'p', () => ++runs, { waitMs: 5_000, leaseMs: 30_000 })
        .catch((e: unknown) => e);
      expect(outcome).toBe(1);
      expect(await store.execute(k, 'p', () => ++runs)).toEqual({ value: 1, replayed: true });
      expect(runs).toBe(1);
    } finally {
      await store.close();
      await proxy.close();
    }
  }, 20_000);

  it('a start whose reply comes after its lease ran out is not run (no lease is born lost)', async () => {
    const target = new URL(servers.urls[backend]);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const viaProxy = servers.urls[backend].replace(`:${target.port}`, `:${proxy.port}`);
    const store = await createIdempotencyStore(viaProxy, { callTimeoutMs: CALL_TIMEOUT_MS });
    const k = `late-${crypto.randomUUID()}`;
    const entered: boolean[] = []; // per call of fn: was its lease signal already aborted?
    const fn = ({ signal }: { signal: AbortSignal }) => {
      entered.push(signal.aborted);
      return 'charged';
    };
    try {
      await store.run(`warm-${crypto.randomUUID()}`, 'p', () => 'warm');
      proxy.setMode({ kind: 'delay', direction: 'toClient', ms: 250 }); // every reply 250 ms late
      const late = await store.run(k, 'p', fn, { leaseMs: 150 }).catch((e: unknown) => e);
      expect(entered).toEqual([]); // fn was never handed a lease that had already run out
      expect(late).toBeInstanceOf(BackendUnavailableError);
      proxy.setMode({ kind: 'pass' });
      expect(await store.run(k, 'p', fn, { leaseMs: 2_000, waitMs: 3_000 })).toBe('charged');
      expect(entered).toEqual([false]);
    } finally {
      await store.close();
      await proxy.close();
    }
  }, 20_000);

  const LOST_LEASE_MS = 3_000;
  it('a lost reply to the begin: the repeat is told "in flight", then takes the run over once the lease ends', async () => {
    const target = new URL(servers.urls[backend]);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const viaProxy = servers.urls[backend].replace(`:${target.port}`, `:${proxy.port}`);
    const store = await createIdempotencyStore(viaProxy, { callTimeoutMs: CALL_TIMEOUT_MS });
    const k = `lost-reply-${crypto.randomUUID()}`;
    let runs = 0;
    try {
      await store.run(`warm-${crypto.randomUUID()}`, 'p', () => 'warm'); // table created, connection open
      if (backend === 'etcd') {
        // The start's Txn (the one carrying the payload hash; a read comes first). The etcd3 client
        // replays a call whose connection broke: held down, its replay misses the deadline too.
        const hash = store.hash('p');
        proxy.cutAfterRequest(
          (chunk) => chunk.includes(k) && chunk.includes(hash),
          () => proxy.setMode({ kind: 'partition' }),
        );
      } else proxy.cutAfterRequest((chunk) => chunk.includes(k));
      // The lease outlasts the lost call and the repeat (a few call deadlines) on a busy machine too.
      const lost = await store.run(k, 'p', () => runs++, { leaseMs: LOST_LEASE_MS }).catch((e: unknown) => e);
      expect(lost).toBeInstanceOf(BackendUnavailableError);
      proxy.setMode({ kind: 'pass' });
      const busy = await store.run(k, 'p', () => runs++, { leaseMs: LOST_LEASE_MS }).catch((e: unknown) => e);
      expect(busy).toBeInstanceOf(IdempotencyInFlightError);
      expect(
        await store.run(k, 'p', () => ++runs, { leaseMs: LOST_LEASE_MS, waitMs: 3 * LOST_LEASE_MS }),
      ).toBe(1);
      expect(runs).toBe(1);
    } finally {
      await store.close();
      await proxy.close();
    }
  }, 20_000);
});
