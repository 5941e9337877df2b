import { describe, expect, it, vi } from 'vitest';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import {
  createElection,
  type Lock,
  type LockProvider,
  MemoryLockProvider,
  memoryLedger,
  runAsLeader,
  runSingleton,
} from '../../src/index.js';
import { OwnedLock } from '../../src/ownership.js';
import { eventually, MemoryLockServer } from '../../src/testing/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Blocks the event loop, as a GC pause or SIGSTOP would: no timer, no reply is handled meanwhile. */
function pause(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

describe('no grant is born lost', () => {
  it('a waiter whose grant arrives after its lease could have passed on is not handed a lost lock', async () => {
    const server = new MemoryLockServer();
    const [a, b] = [new MemoryLockProvider({ server }), new MemoryLockProvider({ server })];
    const first = await a.acquire('k', { ttlMs: 200 });
    const waiting = b.acquire('k', { ttlMs: 200, waitMs: 5_000 });
    await sleep(20);
    void first.release(); // grants b on the server, synchronously
    pause(300); // b's process stalls before it sees the grant: its 200 ms lease is over by then
    const lock = await waiting;
    // Before the fix: resolved with held false and an aborted signal ("unconfirmed").
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    await lock.release();
    await Promise.all([a.close(), b.close()]);
  });

  it('runAsLeader never runs a term whose leadership is already lost', async () => {
    const lost = new AbortController();
    lost.abort(new Error('lost before the term began'));
    let calls = 0;
    const bornLost = {
      backend: 'memory',
      election: () => ({
        campaign: async () => ({
          term: 1n,
          signal: lost.signal,
          proclaim: async () => undefined,
          resign: async () => undefined,
        }),
        leader: async () => null,
        observe: async function* () {},
      }),
    } as unknown as LockProvider;
    const stop = new AbortController();
    const run = runAsLeader(
      bornLost,
      'svc',
      async () => {
        calls += 1;
      },
      { signal: stop.signal, backoff: { initialMs: 5, maxMs: 10 } },
    );
    await sleep(100);
    stop.abort();
    await run;
    expect(calls).toBe(0);
  });
});

describe('memory provider: cancel and grant in the same turn', () => {
  it('leaves no unhandled rejection when the give-back fails (partitioned client)', async () => {
    const server = new MemoryLockServer();
    const [a, b] = [new MemoryLockProvider({ server }), new MemoryLockProvider({ server })];
    const first = await a.acquire('k');
    const controller = new AbortController();
    const waiting = b.acquire('k', { signal: controller.signal });
    await sleep(10);
    b.simulate.partition(true);
    void first.release(); // grants b synchronously
    controller.abort(new Error('cancelled in the same turn'));
    await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
    await sleep(50); // an unhandled rejection would surface here and fail the run
    b.simulate.partition(false);
    await Promise.all([a.close(), b.close()]);
  });
});

describe('long waits and long periods', () => {
  it('a grant confirmed for longer than 2^31 ms stays held (its deadline timer does not fire after 1 ms)', async () => {
    const lock = new OwnedLock({
      key: 'long',
      fencingToken: 1n,
      ownerToken: 'owner',
      releaseOnBackend: () => Promise.resolve(),
    });
    lock.confirmUntil(performance.now() + 2 ** 31 + 60_000); // redlock takes any duration
    const signal = lock.signal;
    await sleep(20); // a clamped timer would have fired by now
    expect({ held: lock.held, aborted: signal.aborted }).toEqual({ held: true, aborted: false });
    await lock.release();
  });

  it('acquire({ waitMs }) beyond 2^31-1 ms does not time out after 1 ms', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    const holder = await provider.acquire('k');
    const controller = new AbortController();
    const settled = vi.fn();
    const waiting = provider.acquire('k', { waitMs: 2 ** 31 + 1_000, signal: controller.signal });
    waiting.then(settled, settled);
    await sleep(100);
    // Before the fix: LockTimeoutError after 1 ms (Node clamps the timer).
    expect(settled).not.toHaveBeenCalled();
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
    await holder.release();
    await provider.close();
  });

  it('runSingleton waits for a tick more than 24.8 days away instead of running in a loop', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    const stop = new AbortController();
    let runs = 0;
    // The next run is months away (unless today is that minute).
    const run = runSingleton(
      provider,
      'yearly',
      async () => {
        runs += 1;
      },
      { cron: '0 0 11 3 *', lockAtMostForMs: 60_000, signal: stop.signal },
    );
    await sleep(500);
    stop.abort();
    await run;
    // Before the fix: 378 runs in 1 s.
    expect(runs).toBe(0);
    await provider.close();
  });

  it('refuses everyMs below the shortest lease up front', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    await expect(runSingleton(provider, 'x', async () => undefined, { everyMs: 20 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      argument: 'everyMs',
    });
    await provider.close();
  });
});

describe('runSingleton with fake time', () => {
  it('a period over 24 h runs (weekly job; before: INVALID_ARGUMENT on every tick)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
    try {
      const week = 7 * 86_400_000;
      vi.setSystemTime(Math.ceil(Date.now() / week) * week - 50);
      const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
      const stop = new AbortController();
      const errors: unknown[] = [];
      let runs = 0;
      const run = runSingleton(
        provider,
        'weekly',
        async () => {
          runs += 1;
        },
        { everyMs: week, lockAtLeastForMs: 0, signal: stop.signal, onError: (e) => errors.push(e) },
      );
      await vi.advanceTimersByTimeAsync(200);
      stop.abort();
      await vi.advanceTimersByTimeAsync(10);
      await run;
      expect(errors).toEqual([]);
      expect(runs).toBe(1);
      await provider.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('the 25-hour DST day of a daily cron runs (America/New_York, 2026-10-31 → 11-01)', async () => {
    const tz = process.env.TZ;
    process.env.TZ = 'America/New_York';
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
    try {
      // 07:00 EDT on Oct 31 is 11:00Z; the next 07:00 (EST) is 25 h later.
      vi.setSystemTime(new Date('2026-10-31T10:59:59.900Z'));
      const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
      const stop = new AbortController();
      const errors: unknown[] = [];
      let runs = 0;
      const run = runSingleton(
        provider,
        'daily',
        async () => {
          runs += 1;
        },
        { cron: '0 7 * * *', lockAtLeastForMs: 0, signal: stop.signal, onError: (e) => errors.push(e) },
      );
      await vi.advanceTimersByTimeAsync(300);
      stop.abort();
      await vi.advanceTimersByTimeAsync(10);
      await run;
      expect(errors).toEqual([]);
      expect(runs).toBe(1);
      await provider.close();
    } finally {
      vi.useRealTimers();
      if (tz === undefined) delete process.env.TZ;
      else process.env.TZ = tz;
    }
  });
});

describe('runSingleton: a replica whose timer fires late', () => {
  it('skips a tick the shared ledger shows as run', async () => {
    const server = new MemoryLockServer();
    const ledger = memoryLedger();
    const runsByTick = new Map<number, string[]>();
    const stop = new AbortController();
    const replica = (name: string, provider: LockProvider) =>
      runSingleton(
        provider,
        'report',
        async ({ tick }) => {
          runsByTick.set(tick.getTime(), [...(runsByTick.get(tick.getTime()) ?? []), name]);
        },
        { everyMs: 200, lockAtLeastForMs: 0, ledger, replica: name, signal: stop.signal },
      );
    const fast = new MemoryLockProvider({ server });
    const slowInner = new MemoryLockProvider({ server });
    // The late replica reaches the lock 100 ms after the tick, when the fast one has released it.
    const slow = new Proxy(slowInner, {
      get(target, property, receiver) {
        if (property === 'tryAcquire') {
          return async (...args: Parameters<LockProvider['tryAcquire']>) => {
            await sleep(100);
            return target.tryAcquire(...args);
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const runs = [replica('fast', fast), replica('slow', slow)];
    await sleep(1_000);
    stop.abort();
    await Promise.all(runs);
    expect(runsByTick.size).toBeGreaterThanOrEqual(3);
    // Before the fix: ticks run by both replicas.
    for (const [tick, who] of runsByTick) expect(who, `tick ${tick}`).toHaveLength(1);
    await Promise.all([fast.close(), slowInner.close()]);
  });
});

describe('runAsLeader: observer errors', () => {
  it('keeps observing after a failed inspect, reports the error and the new leader', async () => {
    const server = new MemoryLockServer();
    const leader = new MemoryLockProvider({ server });
    const observerInner = new MemoryLockProvider({ server });
    let failing = false;
    const observer = new Proxy(observerInner, {
      get(target, property, receiver) {
        if (property === 'inspect') {
          return async (key: string) => {
            if (failing) throw new Error('blip');
            return target.inspect(key);
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const stop = new AbortController();
    const seen: Array<string | null> = [];
    const errors: unknown[] = [];
    const first = await leader.acquire('svc', { owner: 'one' });
    const run = runAsLeader(
      observer,
      'svc',
      async ({ signal }) => new Promise<void>((r) => signal.addEventListener('abort', () => r())),
      {
        value: 'observer',
        signal: stop.signal,
        pollMs: 20,
        backoff: { initialMs: 10, maxMs: 50 },
        onLeaderChange: (l) => seen.push(l?.value ?? null),
        onError: (e) => errors.push(e),
      },
    );
    await sleep(100);
    failing = true;
    await sleep(150);
    await first.release();
    const second = await leader.acquire('svc', { owner: 'two', waitMs: 2_000 }).catch(() => null);
    failing = false;
    await sleep(300);
    stop.abort();
    await run;
    expect(errors.length).toBeGreaterThan(0);
    // Before the fix: only 'one' (the observer stopped for good at the first error).
    expect(seen.length).toBeGreaterThan(1);
    await second?.release();
    await Promise.all([leader.close(), observerInner.close()]);
  });
});

describe('close() and lost locks', () => {
  it('close() releases a lock that was lost locally but still exists on the server', async () => {
    const server = new MemoryLockServer();
    const a = new MemoryLockProvider({ server, driftRate: 0.3 });
    const lock: Lock = await a.acquire('k', { ttlMs: 1_000 });
    a.simulate.partition(true);
    await new Promise((r) => lock.signal.addEventListener('abort', r));
    expect((lock.signal.reason as { reason?: string }).reason).toBe('unconfirmed');
    a.simulate.partition(false);
    // The server still has a's lease (it ends at 1 s; the signal aborted at ~0.7 s).
    expect(server.inspect('k')?.holder?.fencingToken).toBe(lock.fencingToken);
    await a.close();
    // Before the fix: the key stayed a's until its lease ran out.
    expect(server.inspect('k')).toBeNull();
  });

  it('withLock without a function refuses up front and takes no lock', async () => {
    const server = new MemoryLockServer();
    const a = new MemoryLockProvider({ server });
    await expect(a.withLock('k', undefined as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(server.inspect('k')).toBeNull();
    await a.close();
  });
});

describe('runSingleton with skewed clocks', () => {
  it('replicas whose clocks disagree by more than lockAtLeastFor still run each tick once', async () => {
    const server = new MemoryLockServer();
    const ledger = memoryLedger();
    const runsByTick = new Map<number, string[]>();
    const stop = new AbortController();
    // Three replicas: one on time, one 150 ms ahead, one 150 ms behind; ticks every 400 ms and
    // lockAtLeastFor only 50 ms, so the lock alone cannot keep a skewed replica off a tick.
    const skews = { exact: 0, ahead: 150, behind: -150 };
    const providers = Object.keys(skews).map(() => new MemoryLockProvider({ server }));
    const runs = Object.entries(skews).map(([name, skew], i) =>
      runSingleton(
        providers[i] as MemoryLockProvider,
        'report',
        async ({ tick }) => {
          runsByTick.set(tick.getTime(), [...(runsByTick.get(tick.getTime()) ?? []), name]);
        },
        {
          everyMs: 400,
          lockAtLeastForMs: 50,
          ledger,
          replica: name,
          signal: stop.signal,
          clock: () => Date.now() + skew,
        },
      ),
    );
    await sleep(2_100);
    stop.abort();
    await Promise.all(runs);
    expect(runsByTick.size).toBeGreaterThanOrEqual(4);
    for (const [tick, who] of runsByTick) expect(who, `tick ${tick}`).toHaveLength(1);
    await Promise.all(providers.map((p) => p.close()));
  });
});

describe('a signal kept aside tells the loss when read, not only when its timer runs', () => {
  // Apps keep the signal (`const { signal } = lock`, a leadership's, a derived one) and read it
  // later. After a stall (a GC pause, a starved process) the deadline has passed but the timer that
  // aborts the signal has not run yet: the read itself must say "lost" (before, only reads through
  // `lock.signal` did, and a term's signal or a kept one answered "held" past its deadline).
  it("a lock's kept signal, a leadership's and runAsLeader's read aborted once the deadline passed", async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer(), ttlMs: 200 });
    try {
      const lock = await provider.acquire('kept', { ttlMs: 200 });
      const { signal } = lock;
      const leadership = await createElection(provider, 'kept-term').campaign('a');
      const termSignal = leadership.signal;
      expect([signal.aborted, termSignal.aborted]).toEqual([false, false]);
      pause(400); // past the 200 ms leases: no renewal, no abort timer runs meanwhile
      expect([signal.aborted, termSignal.aborted]).toEqual([true, true]);
      expect(signal.reason).toMatchObject({ code: 'LOCK_LOST' });
      expect(() => termSignal.throwIfAborted()).toThrow();

      let ranPastDeadline: boolean | undefined;
      const stop = new AbortController();
      await runAsLeader(
        provider,
        'kept-run',
        async ({ signal: derived }) => {
          pause(400);
          ranPastDeadline = derived.aborted;
          stop.abort();
        },
        { signal: stop.signal, backoff: { initialMs: 5, maxMs: 10 } },
      );
      expect(ranPastDeadline).toBe(true);
    } finally {
      await provider.close();
    }
  });

  it("runSingleton's job signal reads aborted once the run is over; an idempotent run's after a stall past its lease", async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer(), ttlMs: 200 });
    const stop = new AbortController();
    let jobSignal: AbortSignal | undefined;
    const singleton = runSingleton(
      provider,
      'kept-job',
      async ({ signal: s }) => {
        jobSignal = s; // and returns: the run is over, the runner goes on
      },
      { everyMs: 1_000, lockAtMostForMs: 200, signal: stop.signal },
    );
    try {
      await eventually('the job ran', async () => jobSignal !== undefined, 10_000);
      // Before: a job's kept signal read live forever once the run was over.
      await eventually("the job's signal reads aborted", async () => jobSignal?.aborted === true, 5_000);
    } finally {
      stop.abort();
      await singleton;
      await provider.close();
    }

    const store = await createIdempotencyStore('memory://');
    let leaseSignal: AbortSignal | undefined;
    let pastLease: boolean | undefined;
    await store.run(
      'kept-run',
      {},
      ({ signal: s }) => {
        leaseSignal = s;
        pause(400); // past the 200 ms lease, with no timer run meanwhile
        pastLease = s.aborted;
      },
      { leaseMs: 200 },
    );
    expect(leaseSignal).toBeDefined();
    expect(pastLease).toBe(true);
    await store.close();
  });
});
