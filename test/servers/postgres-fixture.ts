import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { endpoint, startServers } from './index.js';
import type { ServerGroup } from './types.js';

type PostgresOptions = ConstructorParameters<typeof PostgresLockProvider>[0];

/**
 * A PostgreSQL server for the tests of one describe block (started before them, stopped after),
 * an admin connection to it, and providers on it that are closed at the end. Call it inside
 * describe(); `onStop` runs first in afterAll (close the block's own proxies and clients there).
 */
export function postgresFixture(onStop: () => Promise<void> = async () => undefined) {
  let server: ServerGroup | undefined;
  let url = '';
  let admin: pg.Client | undefined;
  const providers: PostgresLockProvider[] = [];
  beforeAll(async () => {
    server = await startServers('postgres');
    url = endpoint(server, 'PG_URL');
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
  });
  afterAll(async () => {
    await onStop();
    await Promise.allSettled(providers.map((p) => p.close()));
    await admin?.end();
    await server?.stop();
  });
  return {
    /** The server's connection URL (after beforeAll). */
    get url(): string {
      return url;
    },
    /** A connection for the test's own queries (after beforeAll). */
    get admin(): pg.Client {
      if (!admin) throw new Error('postgresFixture: admin is there only after beforeAll');
      return admin;
    },
    /** Registers a provider made elsewhere so that it is closed after the describe block. */
    track(provider: PostgresLockProvider): PostgresLockProvider {
      providers.push(provider);
      return provider;
    },
    /** A provider on the server, closed after the describe block. */
    open(options: Partial<PostgresOptions> = {}): PostgresLockProvider {
      return this.track(new PostgresLockProvider({ connectionString: url, ...options }));
    },
  };
}
