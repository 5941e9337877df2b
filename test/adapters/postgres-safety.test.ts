import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
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
  afterAll(async () => {
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
});
