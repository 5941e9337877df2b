import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { PostgresRecords } from '../../src/idempotency/postgres-records.js';
import { FaultProxy } from '../servers/index.js';
import { beginRun, useStoreServers } from './backends.js';

// The table setup runs on a client the store checks out itself: a connection reset while it is
// out fails the call that needed the table, and must not end the process with an unhandled
// 'error' event (pg emits one on the client when its socket fails).
const servers = useStoreServers();

describe('idempotency store on postgres, table setup', () => {
  it('a connection reset during the table setup fails the call, not the process', async () => {
    const target = new URL(servers.urls.postgres);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const pool = new pg.Pool({
      connectionString: servers.urls.postgres.replace(`:${target.port}`, `:${proxy.port}`),
      max: 1,
    });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      await pool.query('SELECT 1'); // an idle connection: setup checks it out without connecting
      const records = new PostgresRecords(pool, `setup_reset_${crypto.randomUUID().slice(0, 8)}`);
      proxy.setMode({ kind: 'partition' });
      const begun = beginRun(records, 'k', 'h', 1_000, 60_000, 'a').catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 200)); // setup's first statement is held
      proxy.reset();
      expect(await begun).toBeInstanceOf(Error);
      await new Promise((r) => setTimeout(r, 100));
      expect(uncaught).toEqual([]);

      // The next call sets the table up on a fresh connection.
      proxy.setMode({ kind: 'pass' });
      expect(await beginRun(records, 'k', 'h', 1_000, 60_000, 'a')).toMatchObject({ state: 'started' });
    } finally {
      process.off('uncaughtException', onUncaught);
      await pool.end().catch(() => undefined);
      await proxy.close();
    }
  }, 20_000);
});
