import { describe, expect, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import type { Lock } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { postgresFixture } from '../servers/postgres-fixture.js';

const NAMES = 30;

/** What a promise ended with: 'granted', or the error's code (its message when it has none). */
function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    (value) => (value === null ? 'busy' : 'granted'),
    (error: { code?: string; message?: string }) => error.code ?? error.message ?? 'error',
  );
}

/** Polls check() until it is true or 15 s pass (the assertions after it tell what went wrong). */
async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 15_000;
  while (!(await check()) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

describe('PostgreSQL waitingConnections: waiters of many names do not take every connection', () => {
  const server = postgresFixture();

  /** A provider whose backends can be told apart in pg_stat_activity. */
  const openNamed = (options: ConstructorParameters<typeof PostgresLockProvider>[0]) => {
    const app = `fk-waiting-${crypto.randomUUID().slice(0, 8)}`;
    const provider = server.open({ ...options, pool: { application_name: app } });
    /** Its backends blocked in a lock wait now. */
    const blocked = async () => {
      const { rows } = await server.admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
        [app],
      );
      return Number(rows[0]?.n ?? 0);
    };
    /** The most blocked at once over `samples` looks, 100 ms apart. */
    const blockedPeak = async (samples: number) => {
      let peak = 0;
      for (let i = 0; i < samples; i++) {
        peak = Math.max(peak, await blocked());
        await new Promise((r) => setTimeout(r, 100));
      }
      return peak;
    };
    return { provider, app, blocked, blockedPeak };
  };

  it('30 waiters on 30 names with maxConnections 4 and waitingConnections 1: one blocks, a try and an acquire of a free name are granted, then every waiter with a higher token', async () => {
    const holder = server.open({ maxConnections: NAMES + 2 });
    const { provider: waiting, blockedPeak } = openNamed({
      maxConnections: 4,
      waitingConnections: 1,
      callTimeoutMs: 5_000,
    });
    const names = Array.from({ length: NAMES }, (_, i) => uniqueKey(`many-names-${i}`));
    const held = await Promise.all(names.map((name) => holder.acquire(name)));
    // Each granted waiter releases at once: 4 connections cannot hold 30 locks together.
    const waits = names.map((name) =>
      waiting.acquire(name, { waitMs: 120_000 }).then(async (lock) => {
        await lock.release();
        return lock.fencingToken;
      }),
    );
    // Every waiter waits, blocked on the server or polling: this provider's inspect() counts both.
    await until(async () => {
      const seen = await Promise.all(names.map((name) => waiting.inspect(name)));
      return seen.every((info) => info?.waiters === 1);
    });
    const peakBefore = await blockedPeak(10);
    const tried = waiting.tryAcquire(uniqueKey('free-try'));
    const triedOutcome = await outcome(tried);
    await (await tried.catch(() => null))?.release();
    const acquired = waiting.acquire(uniqueKey('free-acquire'), { waitMs: 15_000 });
    const acquiredOutcome = await outcome(acquired);
    await (await acquired.catch(() => null))?.release();
    const peakAfter = await blockedPeak(5);
    for (const lock of held) await lock.release();
    const granted = await Promise.allSettled(waits);
    const tokens = granted.map((r) => (r.status === 'fulfilled' ? r.value : -1n));
    const rising = tokens.every((token, i) => token > (held[i] as Lock).fencingToken);
    expect({
      blockedAtMost: Math.max(peakBefore, peakAfter),
      triedOutcome,
      acquiredOutcome,
      granted: tokens.filter((token) => token >= 0n).length,
      rising,
    }).toEqual({
      blockedAtMost: 1,
      triedOutcome: 'granted',
      acquiredOutcome: 'granted',
      granted: NAMES,
      rising: true,
    });
  }, 120_000);

  it('with waitingConnections 0 a waiter holds no connection while it waits; a polling waiter times out, is aborted, is woken by a release in its own process, and leaves nothing behind', async () => {
    const holder = server.open();
    const { provider: waiting, blockedPeak } = openNamed({ waitingConnections: 0 });
    const [granted, timed, aborted, local] = ['granted', 'timed', 'aborted', 'local'].map((label) =>
      uniqueKey(`polling-${label}`),
    ) as [string, string, string, string];
    const held = await Promise.all([granted, timed, aborted].map((name) => holder.acquire(name)));
    const first = waiting.acquire(granted, { waitMs: 60_000 });
    const controller = new AbortController();
    const abortedWait = outcome(waiting.acquire(aborted, { signal: controller.signal }));
    const timedWait = outcome(waiting.acquire(timed, { waitMs: 1_000 }));
    await until(async () => (await waiting.inspect(aborted))?.waiters === 1);
    const peak = await blockedPeak(10);
    controller.abort(new Error('shutting down'));
    const outcomes = { aborted: await abortedWait, timed: await timedWait };
    const leftBehind = [(await holder.inspect(aborted))?.waiters, (await holder.inspect(timed))?.waiters];
    // A release in the waiter's own process: the waiter tries at once (it would find it anyway).
    const mine = await waiting.acquire(local);
    const second = waiting.acquire(local, { waitMs: 60_000 });
    await until(async () => (await waiting.inspect(local))?.waiters === 1);
    await mine.release();
    const secondLock = await second;
    await secondLock.release();
    for (const lock of held) await lock.release();
    const firstLock = await first;
    await firstLock.release();
    expect({
      blockedAtMost: peak,
      ...outcomes,
      leftBehind,
      rising: [
        firstLock.fencingToken > (held[0] as Lock).fencingToken,
        secondLock.fencingToken > mine.fencingToken,
      ],
      left: await holder.inspect(granted),
    }).toEqual({
      blockedAtMost: 0,
      aborted: 'ABORTED',
      timed: 'LOCK_TIMEOUT',
      leftBehind: [0, 0],
      rising: [true, true],
      left: null,
    });
  }, 90_000);

  it('semaphores: 10 waiting requests on 10 semaphores with maxConnections 4 and waitingConnections 1 leave connections for a try and an acquire; all granted after release', async () => {
    const holder = server.open({ maxConnections: 12 });
    const { provider: waiting } = openNamed({
      maxConnections: 4,
      waitingConnections: 1,
      callTimeoutMs: 5_000,
    });
    const names = Array.from({ length: 10 }, (_, i) => uniqueKey(`many-semaphores-${i}`));
    const held = await Promise.all(names.map((name) => holder.semaphore(name, { limit: 1 }).acquire()));
    const timedName = uniqueKey('timed-semaphore');
    const heldTimed = await holder.semaphore(timedName, { limit: 1 }).acquire();
    const semaphores = names.map((name) => waiting.semaphore(name, { limit: 1 }));
    const waits = semaphores.map((semaphore) =>
      semaphore.acquire({ waitMs: 120_000 }).then(async (permit) => {
        await permit.release();
        return permit.fencingToken;
      }),
    );
    await until(async () => {
      const seen = await Promise.all(semaphores.map((semaphore) => semaphore.inspect()));
      return seen.every((info) => info.waiters >= 1);
    });
    const free = waiting.semaphore(uniqueKey('free-semaphore'), { limit: 1 });
    const tried = free.tryAcquire();
    const triedOutcome = await outcome(tried);
    await (await tried.catch(() => null))?.release();
    const acquired = free.acquire({ waitMs: 15_000 });
    const acquiredOutcome = await outcome(acquired);
    await (await acquired.catch(() => null))?.release();
    // A first waiter of its name, beyond the one waiting connection: it polls until its deadline.
    const timedOutcome = await outcome(waiting.semaphore(timedName, { limit: 1 }).acquire({ waitMs: 1_000 }));
    await heldTimed.release();
    for (const permit of held) await permit.release();
    const granted = await Promise.allSettled(waits);
    const tokens = granted.map((r) => (r.status === 'fulfilled' ? r.value : -1n));
    const rising = tokens.every((token, i) => token > (held[i]?.fencingToken ?? 0n));
    const grantedCount = tokens.filter((token) => token >= 0n).length;
    expect({ triedOutcome, acquiredOutcome, timedOutcome, granted: grantedCount, rising }).toEqual({
      triedOutcome: 'granted',
      acquiredOutcome: 'granted',
      timedOutcome: 'LOCK_TIMEOUT',
      granted: names.length,
      rising: true,
    });
  }, 120_000);

  it('a polling semaphore waiter reuses one pooled connection: it opens no backend per look, and the connection goes back holding no lock', async () => {
    const holder = server.open();
    const { provider: waiting, app } = openNamed({ waitingConnections: 0 });
    const name = uniqueKey('polling-semaphore');
    const held = await holder.semaphore(name, { limit: 1 }).acquire();
    let connects = 0;
    let looks = 0;
    waiting.pool.on('connect', () => connects++);
    waiting.pool.on('acquire', () => looks++);
    const controller = new AbortController();
    const semaphore = waiting.semaphore(name, { limit: 1 });
    const aborted = outcome(semaphore.acquire({ signal: controller.signal }));
    // Counted in looks, not in time: a slower machine only makes the wait longer.
    const deadline = performance.now() + 30_000;
    while (looks < 6 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const connectsWhilePolling = connects;
    controller.abort(new Error('enough looks'));
    const abortedOutcome = await aborted;
    // The acquire rejects at the abort; a look still on the server ends after it and then lets go
    // of its locks (or its connection): wait for that, then count what is left.
    const advisoryLocks = async () =>
      Number(
        (
          await server.admin.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
              WHERE a.application_name = $1 AND l.locktype = 'advisory'`,
            [app],
          )
        ).rows[0]?.n,
      );
    await eventually(
      'the aborted look let go of its locks',
      async () => (await advisoryLocks()) === 0,
      10_000,
    ).catch(
      () => undefined, // asserted below with the count
    );
    const advisoryLocksLeft = await advisoryLocks();
    await held.release();
    const permit = await semaphore.acquire({ waitMs: 15_000 });
    const rising = permit.fencingToken > held.fencingToken;
    await permit.release();
    expect({
      looked: looks >= 6,
      connects: connectsWhilePolling,
      abortedOutcome,
      advisoryLocksLeft,
      rising,
    }).toEqual({
      looked: true,
      connects: 1,
      abortedOutcome: 'ABORTED',
      advisoryLocksLeft: 0,
      rising: true,
    });
  }, 60_000);

  it('with maxConnections 1 the waiter polls by default: a try of another name still finds the connection', async () => {
    const holder = server.open();
    const { provider: waiting, blockedPeak } = openNamed({ maxConnections: 1, callTimeoutMs: 5_000 });
    const [busy, free] = [uniqueKey('one-connection-busy'), uniqueKey('one-connection-free')];
    const held = await holder.acquire(busy);
    const waited = waiting.acquire(busy, { waitMs: 60_000 });
    await until(async () => (await waiting.inspect(busy))?.waiters === 1);
    const peak = await blockedPeak(5);
    const tried = waiting.tryAcquire(free);
    const triedOutcome = await outcome(tried);
    await (await tried.catch(() => null))?.release();
    await held.release();
    const lock = await waited;
    await lock.release();
    expect({ blockedAtMost: peak, triedOutcome, rising: lock.fencingToken > held.fencingToken }).toEqual({
      blockedAtMost: 0,
      triedOutcome: 'granted',
      rising: true,
    });
  }, 60_000);

  it('waitingConnections must be an integer from 0 to maxConnections - 1, and is by default', async () => {
    const made = (options: ConstructorParameters<typeof PostgresLockProvider>[0]) => {
      try {
        void new PostgresLockProvider({ connectionString: server.url, ...options }).close();
        return 'accepted';
      } catch (error) {
        return (error as { code?: string }).code ?? 'thrown';
      }
    };
    expect({
      negative: made({ waitingConnections: -1 }),
      fraction: made({ waitingConnections: 1.5 }),
      overMax: made({ maxConnections: 4, waitingConnections: 5 }),
      notANumber: made({ waitingConnections: Number.NaN }),
      text: made({ waitingConnections: '2' as unknown as number }),
      zero: made({ waitingConnections: 0 }),
      all: made({ maxConnections: 4, waitingConnections: 4 }),
      allButOne: made({ maxConnections: 4, waitingConnections: 3 }),
      oneOfOne: made({ maxConnections: 1, waitingConnections: 1 }),
      zeroOfOne: made({ maxConnections: 1, waitingConnections: 0 }),
      byDefault: made({ maxConnections: 1 }),
    }).toEqual({
      negative: 'INVALID_ARGUMENT',
      fraction: 'INVALID_ARGUMENT',
      overMax: 'INVALID_ARGUMENT',
      notANumber: 'INVALID_ARGUMENT',
      text: 'INVALID_ARGUMENT',
      zero: 'accepted',
      all: 'INVALID_ARGUMENT',
      allButOne: 'accepted',
      oneOfOne: 'INVALID_ARGUMENT',
      zeroOfOne: 'accepted',
      byDefault: 'accepted',
    });
  });
});
