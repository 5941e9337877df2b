import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { PostgresLockProvider, withXactLock, xactLock } from '../../adapters/postgres/index.js';
import { createElection } from '../../src/index.js';
import { ExclusionMonitor, eventually, uniqueKey } from '../../src/testing/index.js';
import { FaultProxy } from '../servers/index.js';
import { postgresFixture } from '../servers/postgres-fixture.js';

/** How `promise` settled within `ms`: 'resolved', the rejection's code, or 'pending', with the time taken. */
async function settleWithin(promise: Promise<unknown>, ms: number): Promise<{ outcome: string; ms: number }> {
  const started = performance.now();
  const outcome = await Promise.race([
    promise.then(
      () => 'resolved',
      (error: { code?: string; message?: string }) => error?.code ?? error?.message ?? 'rejected',
    ),
    new Promise<string>((r) => setTimeout(() => r('pending'), ms)),
  ]);
  return { outcome, ms: Math.round(performance.now() - started) };
}

/** Records the first uncaught exception or unhandled rejection while `fn` runs, and where. */
async function watchCrashes<T>(fn: (where: (at: string) => void) => Promise<T>): Promise<string[]> {
  let at = 'before the loop';
  const crashes: string[] = [];
  const onCrash = (error: unknown) => crashes.push(`${at}: ${(error as Error)?.message ?? error}`);
  process.on('uncaughtExceptionMonitor', onCrash);
  process.on('unhandledRejection', onCrash);
  try {
    await fn((where) => {
      at = where;
    });
  } finally {
    process.off('uncaughtExceptionMonitor', onCrash);
    process.off('unhandledRejection', onCrash);
  }
  return crashes;
}

const CALL_MS = 500;

describe('PostgreSQL adapter: safety under cancel, rollback and faults', () => {
  const server = postgresFixture(async () => {
    await Promise.allSettled(proxies.map((p) => p.close()));
    await Promise.allSettled(clients.map((c) => c.end()));
  });
  const open = server.open.bind(server);
  const clients: pg.Client[] = [];
  const client = async () => {
    const c = new pg.Client({ connectionString: server.url });
    c.on('error', () => undefined); // a test that terminates it must not crash the run
    await c.connect();
    clients.push(c);
    return c;
  };
  const proxies: FaultProxy[] = [];
  /** A provider whose every connection goes through a fault proxy of its own. */
  const throughProxy = async (
    options: Partial<ConstructorParameters<typeof PostgresLockProvider>[0]> = {},
  ) => {
    const target = new URL(server.url);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    proxies.push(proxy);
    target.port = String(proxy.port);
    const provider = new PostgresLockProvider({
      connectionString: target.toString(),
      callTimeoutMs: CALL_MS,
      healthCheckIntervalMs: 200,
      healthCheckTimeoutMs: 300,
      ...options,
    });
    server.track(provider);
    return { provider, proxy };
  };

  it('waiters that time out or are aborted, 200 rounds: no crash, no connection released twice, no waiter left', async () => {
    const [a, b] = [open(), open()];
    const key = uniqueKey('cancel-churn');
    const holder = await a.acquire(key);
    await b.inspect(key); // b has reached the server: a wait that runs out is a timeout, not an outage
    const codes = new Map<string, number>();
    const crashes = await watchCrashes(async (where) => {
      for (let round = 1; round <= 200; round++) {
        where(`round ${round}`);
        const aborted = new AbortController();
        const attempts = [
          b.acquire(key, { waitMs: 5 }),
          b.acquire(key, { signal: aborted.signal, waitMs: 10_000 }),
        ];
        aborted.abort();
        for (const outcome of await Promise.allSettled(attempts)) {
          const code =
            outcome.status === 'fulfilled'
              ? 'granted'
              : ((outcome.reason as { code?: string }).code ?? 'other');
          codes.set(code, (codes.get(code) ?? 0) + 1);
        }
      }
      where('after the loop');
      await new Promise((r) => setTimeout(r, 200)); // late releases land here
    });
    expect(crashes).toEqual([]);
    expect(Object.fromEntries(codes)).toEqual({ LOCK_TIMEOUT: 200, ABORTED: 200 });
    expect((await a.inspect(key))?.waiters).toBe(0);
    await holder.release();
  });

  it('grants racing cancels, 300 rounds: exclusion holds, no crash, no connection left behind', async () => {
    const [a, b] = [open(), open({ maxConnections: 3 })];
    const key = uniqueKey('grant-cancel-race');
    await b.inspect(key);
    const monitor = new ExclusionMonitor();
    const hold = async (lock: { release(): Promise<void> } & Parameters<ExclusionMonitor['enter']>[0]) => {
      monitor.enter(lock);
      await new Promise((r) => setTimeout(r, Math.random() * 3));
      monitor.exit(lock);
      await lock.release();
    };
    let done = false;
    const outcomes = new Map<string, number>();
    const crashes = await watchCrashes(async (where) => {
      const holder = (async () => {
        while (!done) await hold(await a.acquire(key, { waitMs: 10_000 }));
      })();
      for (let round = 1; round <= 300; round++) {
        where(`round ${round}`);
        const cancel = new AbortController();
        setTimeout(() => cancel.abort(), Math.random() * 4);
        const attempts = [
          b.acquire(key, { waitMs: 1 + Math.random() * 4 }),
          b.acquire(key, { signal: cancel.signal }),
          b.tryAcquire(key, { signal: cancel.signal }),
        ];
        for (const outcome of await Promise.allSettled(attempts)) {
          let code: string;
          if (outcome.status === 'rejected') code = (outcome.reason as { code?: string }).code ?? 'other';
          else if (outcome.value === null) code = 'busy';
          else {
            code = 'granted';
            await hold(outcome.value);
          }
          outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
        }
      }
      done = true;
      await holder;
      where('after the loop');
    });
    expect(crashes).toEqual([]);
    expect(outcomes.get('other') ?? 0).toBe(0);
    expect(outcomes.get('BACKEND_UNAVAILABLE') ?? 0).toBe(0);
    // Every connection and slot came back: b can still take the lock with 3 connections.
    const last = await b.acquire(key, { waitMs: 5_000 });
    await last.release();
    await eventually('no waiter left', async () => (await a.inspect(key)) === null);
  });

  it("xactLock: a rolled-back holder's token is never handed out again", async () => {
    const key = uniqueKey('xact-rollback');
    const [c1, c2] = [await client(), await client()];
    await c1.query('BEGIN');
    const rolledBack = await xactLock(c1, key);
    await c1.query('ROLLBACK'); // a holder that died or was paused mid-transaction ends like this
    const next = await withXactLock(c2, key, async (grant) => grant.fencingToken);
    expect(rolledBack).not.toBeNull();
    expect(
      next,
      `rolled-back holder had token ${rolledBack?.fencingToken}; next holder got ${next}`,
    ).toBeGreaterThan(rolledBack?.fencingToken ?? 0n);
  });

  it("session and transaction grants of one name share one rising order, whatever the transactions' fate", async () => {
    const key = uniqueKey('xact-interleaved');
    const provider = open();
    const c1 = await client();
    const tokens: Array<[string, bigint]> = [];
    const session = async () => {
      const lock = await provider.acquire(key);
      tokens.push(['session', lock.fencingToken]);
      await lock.release();
    };
    const xact = async (fate: 'COMMIT' | 'ROLLBACK') => {
      await c1.query('BEGIN');
      const grant = await xactLock(c1, key);
      tokens.push([`xact ${fate}`, grant?.fencingToken ?? -1n]);
      await c1.query(fate);
    };
    await session();
    await xact('COMMIT');
    await xact('ROLLBACK');
    await session();
    await xact('ROLLBACK');
    await xact('COMMIT');
    await session();
    const order = tokens.map(([kind, token]) => `${kind}=${token}`).join(', ');
    for (let i = 1; i < tokens.length; i++) {
      expect(tokens[i]?.[1], order).toBeGreaterThan(tokens[i - 1]?.[1] ?? 0n);
    }
  });

  it("xactLock creates the token table outside the caller's transaction: another name does not wait behind it", async () => {
    const table = `fencekit_tokens_${crypto.randomUUID().replaceAll('-', '')}`;
    const [c1, c2] = [await client(), await client()];
    await c1.query('BEGIN');
    await xactLock(c1, uniqueKey('first'), { table }); // the first use of the table, in an open transaction
    const started = performance.now();
    const other = withXactLock(c2, uniqueKey('unrelated'), async () => performance.now() - started, {
      table,
    });
    const outcome = await Promise.race([
      other.then((ms) => `done in ${ms?.toFixed(0)} ms`),
      new Promise<string>((r) => setTimeout(() => r('still waiting after 3000 ms'), 3_000)),
    ]);
    await c1.query('COMMIT');
    await other;
    expect(outcome).toMatch(/^done in/);
  });

  it('xactLock after a rolled-back first use of the token table still works', async () => {
    const table = `fencekit_tokens_${crypto.randomUUID().replaceAll('-', '')}`;
    const key = uniqueKey('after-rollback');
    const c1 = await client();
    await c1.query('BEGIN');
    const first = await xactLock(c1, key, { table });
    await c1.query('ROLLBACK');
    const second = await withXactLock(c1, key, async (grant) => grant.fencingToken, { table });
    expect(second).toBeGreaterThan(first?.fencingToken ?? 0n);
  });

  it('blackholed network: release() and withLock return within callTimeoutMs, and the lock is freed', async () => {
    const { provider, proxy } = await throughProxy({ healthCheckIntervalMs: 60_000 });
    const other = open();
    const [k1, k2] = [uniqueKey('release-blackhole'), uniqueKey('withlock-blackhole')];
    const lock = await provider.acquire(k1);
    let inside = false;
    const withLock = provider.withLock(k2, async () => {
      inside = true;
      await new Promise((r) => setTimeout(r, 300));
    });
    while (!inside) await new Promise((r) => setTimeout(r, 10));
    proxy.setMode({ kind: 'blackhole' });
    const released = await settleWithin(lock.release(), 5_000);
    const finished = await settleWithin(withLock, 5_000);
    expect({ released, finished }).toMatchObject({
      released: { outcome: 'resolved' },
      finished: { outcome: 'resolved' },
    });
    expect(released.ms).toBeLessThan(CALL_MS + 1_000);
    // The connection was destroyed; once the server sees that, the names are free again.
    proxy.cutAll();
    proxy.setMode({ kind: 'pass' });
    const next = await other.acquire(k1, { waitMs: 5_000 });
    expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
    await next.release();
  });

  it('partitioned network: release() returns within callTimeoutMs, and on heal the server frees the lock', async () => {
    const { provider, proxy } = await throughProxy({ healthCheckIntervalMs: 60_000 });
    const other = open();
    const key = uniqueKey('release-partition');
    const lock = await provider.acquire(key);
    proxy.setMode({ kind: 'partition' });
    const released = await settleWithin(lock.release(), 5_000);
    expect(released.outcome).toBe('resolved');
    expect(released.ms).toBeLessThan(CALL_MS + 1_000);
    const waiting = other.acquire(key, { waitMs: 10_000 });
    await eventually('the next waiter queued', async () => (await other.inspect(key))?.waiters === 1);
    proxy.setMode({ kind: 'pass' }); // the held unlock and close reach the server now, no reset
    const next = await waiting;
    expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
    await next.release();
  });

  it('blackholed network: resign() returns within callTimeoutMs and the term ends', async () => {
    const { provider, proxy } = await throughProxy({ healthCheckIntervalMs: 60_000 });
    const leadership = await createElection(provider, uniqueKey('resign-blackhole')).campaign('a');
    proxy.setMode({ kind: 'blackhole' });
    const resigned = await settleWithin(leadership.resign(), 5_000);
    expect(resigned.outcome).toBe('resolved');
    expect(resigned.ms).toBeLessThan(CALL_MS + 1_000);
    expect(leadership.signal.aborted).toBe(true);
    proxy.cutAll();
    proxy.setMode({ kind: 'pass' });
  });

  it('blackholed network: a blocked waiter gives up with BackendUnavailableError, not a hang', async () => {
    const holder = open();
    const { provider, proxy } = await throughProxy();
    const key = uniqueKey('wait-blackhole');
    const lock = await holder.acquire(key);
    const waiting = provider.acquire(key, { waitMs: 2_000 });
    await eventually('waiter queued', async () => (await holder.inspect(key))?.waiters === 1);
    proxy.setMode({ kind: 'blackhole' });
    const settled = await settleWithin(waiting, 6_000);
    expect(settled.outcome).toBe('BACKEND_UNAVAILABLE');
    proxy.cutAll(); // as the server's keepalive would, later
    proxy.setMode({ kind: 'pass' });
    await eventually(
      'the dead waiter left the queue',
      async () => (await holder.inspect(key))?.waiters === 0,
    );
    await lock.release();
  });

  it('blackholed network: close() returns within callTimeoutMs + 1 s, signals aborted, waiters failed', async () => {
    const holder = open();
    const { provider, proxy } = await throughProxy({ healthCheckIntervalMs: 60_000 });
    const [mine, theirs] = [uniqueKey('close-held'), uniqueKey('close-waited')];
    const lock = await provider.acquire(mine);
    const blocker = await holder.acquire(theirs);
    // Its outcome is taken at once: the waiter fails during close(), before close() resolves.
    const waiting = settleWithin(provider.acquire(theirs), 20_000);
    await eventually('waiter queued', async () => (await holder.inspect(theirs))?.waiters === 1);
    proxy.setMode({ kind: 'blackhole' });
    const closed = await settleWithin(provider.close(), 10_000);
    expect(closed.outcome).toBe('resolved');
    expect(closed.ms).toBeLessThan(CALL_MS + 1_000);
    expect(lock.signal.aborted).toBe(true);
    expect((await waiting).outcome).toBe('PROVIDER_CLOSED');
    proxy.cutAll();
    proxy.setMode({ kind: 'pass' });
    const next = await holder.acquire(mine, { waitMs: 5_000 });
    await Promise.all([next.release(), blocker.release()]);
  });

  it('unreachable server: BackendUnavailableError within callTimeoutMs', async () => {
    const { provider, proxy } = await throughProxy();
    proxy.setMode({ kind: 'blackhole' }); // before the first connection: it never completes
    const tried = await settleWithin(provider.tryAcquire(uniqueKey('never-reached')), 10_000);
    const waited = await settleWithin(
      provider.acquire(uniqueKey('never-reached'), { waitMs: 10_000 }),
      12_000,
    );
    const short = await settleWithin(provider.acquire(uniqueKey('never-reached'), { waitMs: 200 }), 12_000);
    expect({ tried: tried.outcome, waited: waited.outcome, short: short.outcome }).toEqual({
      tried: 'BACKEND_UNAVAILABLE',
      waited: 'BACKEND_UNAVAILABLE',
      short: 'BACKEND_UNAVAILABLE',
    });
    // min(callTimeoutMs, waitMs), plus scheduling slack
    expect(tried.ms).toBeLessThan(CALL_MS + 1_000);
    expect(short.ms).toBeLessThan(200 + 1_000);
  });

  it('tryAcquire does not wait past callTimeoutMs for a free connection', async () => {
    const provider = open({ maxConnections: 1, callTimeoutMs: CALL_MS });
    const held = await provider.acquire(uniqueKey('the-only-connection'));
    const tried = await settleWithin(provider.tryAcquire(uniqueKey('no-connection-left')), 15_000);
    expect(tried.outcome).toBe('BACKEND_UNAVAILABLE');
    expect(tried.ms).toBeLessThan(CALL_MS + 1_000);
    await held.release();
  });

  it('a cancel whose answer crosses the reply never ends a later grant on a reused connection', async () => {
    const holder = open();
    const { provider, proxy } = await throughProxy({ callTimeoutMs: 5_000, healthCheckTimeoutMs: 2_000 });
    const [busy, next] = [uniqueKey('busy'), uniqueKey('next')];
    const blocker = await holder.acquire(busy);
    // Warm both pools, so that each call below is one round trip.
    await provider.inspect(busy);
    await (await provider.acquire(uniqueKey('warm'))).release();
    proxy.setMode({ kind: 'latency', ms: 200 });
    const cancel = new AbortController();
    const tried = provider.tryAcquire(busy, { signal: cancel.signal }).then(
      () => 'answered',
      (error: { code?: string }) => error.code,
    );
    setTimeout(() => cancel.abort(), 300); // the "busy" answer is on its way back
    await tried;
    const lock = await provider.acquire(next, { waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 1_500));
    expect({ held: lock.held, reason: (lock.signal.reason as Error | undefined)?.message }).toEqual({
      held: true,
      reason: undefined,
    });
    proxy.setMode({ kind: 'pass' });
    await Promise.all([lock.release(), blocker.release()]);
  });
});
