import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLockProvider, withXactLock, xactLock } from '../../adapters/postgres/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

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

describe('PostgreSQL adapter: safety under cancel, rollback and faults', () => {
  let postgres: ServerGroup;
  let url: string;
  let admin: pg.Client;
  const providers: PostgresLockProvider[] = [];
  const open = (options: Partial<ConstructorParameters<typeof PostgresLockProvider>[0]> = {}) => {
    const provider = new PostgresLockProvider({ connectionString: url, ...options });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    postgres = await startServers('postgres');
    url = endpoint(postgres, 'PG_URL');
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
  });
  const clients: pg.Client[] = [];
  const client = async () => {
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => undefined); // a test that terminates it must not crash the run
    await c.connect();
    clients.push(c);
    return c;
  };
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.end()));
    await Promise.allSettled(providers.map((p) => p.close()));
    await admin?.end();
    await postgres?.stop();
  });

  it('waiters that time out or are aborted, 200 rounds: no crash, no connection released twice, no waiter left', async () => {
    const [a, b] = [open(), open()];
    const key = uniqueKey('cancel-churn');
    const holder = await a.acquire(key);
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
});
