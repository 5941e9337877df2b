import { inspect } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import { type ConnectOptions, connect, createElection } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { CliProcesses } from '../cli/cli-process.js';
import { makeTestCertificates, type TestCertificates } from '../servers/certs.js';
import { CERT_USER, startSecurePostgres } from '../servers/postgres-secure.js';
import type { ServerGroup } from '../servers/types.js';
import { leaked } from '../unit/secret-urls.js';
import { expectNoSecret, failure } from './refusals.js';

// PostgreSQL that takes TLS connections only (hostssl scram-sha-256, no plain host line) and the
// least-privilege role of docs/security.md. The password is recognisable, so that a test can say
// it leaked nowhere.
const PASSWORD = 'pg-SECRET/4711?x';
const enc = encodeURIComponent;

let certs: TestCertificates;
let server: ServerGroup;
/** The same, showing the certificate made out for other.invalid. */
let otherHost: ServerGroup;
const hostOf = (group: ServerGroup) => group.members[0]?.address as string;
const as = (group: ServerGroup, user = `fencekit:${enc(PASSWORD)}`): `postgres://${string}` =>
  `postgres://${user}@${hostOf(group)}/postgres`;
const verifyFull = () => `sslmode=verify-full&sslrootcert=${certs.caFile}`;
const clientCert = () => `cert=${certs.client.certFile}&key=${certs.client.keyFile}`;

beforeAll(async () => {
  certs = await makeTestCertificates();
  [server, otherHost] = await Promise.all([
    startSecurePostgres(certs, { password: PASSWORD }),
    startSecurePostgres(certs, { password: PASSWORD, otherHost: true }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([server?.stop(), otherHost?.stop()]);
  await certs?.remove();
});

/** A lock taken and released through a provider on `url`: its fencing token. */
async function lockOnce(url: string, options: ConnectOptions = {}): Promise<bigint> {
  const provider = await connect(url, options);
  try {
    const lock = await provider.acquire(uniqueKey('pg-tls'));
    await lock.release();
    return lock.fencingToken;
  } finally {
    await provider.close();
  }
}

describe('PostgreSQL over TLS with the least-privilege role', () => {
  it('a lock, a waiting hand-over, a semaphore, an election and list() work (sslmode= form)', async () => {
    const provider = await connect(`${as(server)}?${verifyFull()}`);
    try {
      const key = uniqueKey('pg-tls-lock');
      const lock = await provider.acquire(key);
      expect(await provider.list('')).toContain(key);
      const waiting = provider.acquire(key, { waitMs: 20_000 });
      await lock.release();
      const next = await waiting;
      expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
      await next.release();

      const permit = await provider.semaphore(uniqueKey('pg-tls-sem'), { limit: 2 }).acquire();
      await permit.release();

      const leadership = await createElection(provider, uniqueKey('pg-tls-election')).campaign('me');
      expect(leadership.signal.aborted).toBe(false);
      await leadership.resign();
    } finally {
      await provider.close();
    }
    // What the role made is in its own schema, and the role is no superuser.
    const admin = new pg.Client({ connectionString: server.vars.get('PG_ADMIN_URL') });
    await admin.connect();
    try {
      const { rows } = await admin.query(
        `SELECT r.rolsuper, (SELECT array_agg(DISTINCT schemaname::text) FROM pg_tables WHERE tableowner = 'fencekit') AS schemas
           FROM pg_roles r WHERE r.rolname = 'fencekit'`,
      );
      expect(rows).toEqual([{ rolsuper: false, schemas: ['fencekit'] }]);
    } finally {
      await admin.end();
    }
  });

  it("fencekit's form: tls=1&ca= in the URL, and the tls option with contents", async () => {
    expect(await lockOnce(`${as(server)}?tls=1&ca=${certs.caFile}`)).toBeGreaterThan(0n);
    expect(await lockOnce(as(server), { tls: { ca: certs.ca } })).toBeGreaterThan(0n);
  });

  it('servername= names the host the certificate is checked for (localhost here, by address)', async () => {
    expect(await lockOnce(`${as(server)}?ca=${certs.caFile}&servername=localhost`)).toBeGreaterThan(0n);
  });

  it('the idempotency store, in either form', async () => {
    for (const url of [`${as(server)}?${verifyFull()}`, `${as(server)}?tls=1&ca=${certs.caFile}`]) {
      const store = await createIdempotencyStore(url);
      try {
        const key = uniqueKey('pg-tls-idempotency');
        let runs = 0;
        const first = await store.run(key, { order: 42 }, () => ++runs);
        const again = await store.run(key, { order: 42 }, () => ++runs);
        expect([first, again, runs]).toEqual([1, 1, 1]);
      } finally {
        await store.close();
      }
    }
  });

  it('a client certificate is the login of its role (no password), in either form', async () => {
    // A role's tables are its own: the certificate role keeps a table of its own.
    const options = { table: 'cert_fencing_tokens' };
    const user = as(server, CERT_USER);
    expect(await lockOnce(`${user}?ca=${certs.caFile}&${clientCert()}`, options)).toBeGreaterThan(0n);
    const native = `${user}?${verifyFull()}&sslcert=${certs.client.certFile}&sslkey=${certs.client.keyFile}`;
    expect(await lockOnce(native, options)).toBeGreaterThan(0n);
  });

  it('sslmode=verify-ca accepts a certificate of the authority made out for another host', async () => {
    const url = `${as(otherHost)}?sslmode=verify-ca&sslrootcert=${certs.caFile}`;
    expect(await lockOnce(url)).toBeGreaterThan(0n);
  });
});

describe('what PostgreSQL refuses is AUTH_FAILED, at once, and shows no secret', () => {
  const refused: Array<[string, () => string, RegExp]> = [
    ['a plain connection (no hostssl line matches)', () => as(server), /pg_hba\.conf.*\(28000\)/],
    ['sslmode=disable', () => `${as(server)}?sslmode=disable`, /pg_hba\.conf.*\(28000\)/],
    [
      'a wrong password',
      () => `${as(server, `fencekit:not-${enc(PASSWORD)}`)}?${verifyFull()}`,
      /password authentication failed \(28P01\)/,
    ],
    [
      'no password where the server asks for one',
      () => `${as(server, 'fencekit')}?${verifyFull()}`,
      /the server asks for a password and none was given/,
    ],
    [
      'a server certificate from an authority not trusted',
      () => `${as(server)}?tls=1&ca=${certs.untrustedCaFile}`,
      /certificate was not accepted/,
    ],
    [
      'a server certificate made out for another host (servername=)',
      () => `${as(server)}?ca=${certs.caFile}&servername=other.invalid`,
      /certificate was not accepted \(ERR_TLS_CERT_ALTNAME_INVALID\)/,
    ],
    [
      'a server certificate made out for another host (sslmode=verify-full)',
      () => `${as(otherHost)}?${verifyFull()}`,
      /certificate was not accepted \(ERR_TLS_CERT_ALTNAME_INVALID\)/,
    ],
    [
      'the certificate role without a client certificate',
      () => `${as(server, CERT_USER)}?${verifyFull()}`,
      /pg_hba\.conf or the role \(28000\)/,
    ],
  ];

  it.each(refused)('%s', async (_what, url, why) => {
    const provider = await connect(url());
    try {
      // A waiting acquire does not retry a refusal for its waitMs.
      const waitMs = 120_000;
      const { error, ms } = await failure(() => provider.acquire(uniqueKey('refused'), { waitMs }));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(error.message).toMatch(new RegExp(`^postgres at 127\\.0\\.0\\.1:\\d+: .*${why.source}`));
      expect(ms).toBeLessThan(waitMs / 4);
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await provider.close();
    }
  });

  it('the idempotency store refuses too, without retrying for its waitMs', async () => {
    const url = `${as(server, `fencekit:not-${enc(PASSWORD)}`)}?${verifyFull()}`;
    const store = await createIdempotencyStore(url, { defaults: { waitMs: 120_000 } });
    try {
      const { error, ms } = await failure(() => store.run(uniqueKey('refused'), { n: 1 }, () => 1));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(error.message).toMatch(/password authentication failed \(28P01\)/);
      expect(ms).toBeLessThan(120_000 / 4);
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await store.close();
    }
  });

  it('the password shows in no form in the error, its stack or its causes', async () => {
    const wrong = `wrong-${PASSWORD}`;
    const provider = await connect(`${as(server, `fencekit:${enc(wrong)}`)}?tls=1&ca=${certs.caFile}`);
    try {
      const { error } = await failure(() => provider.acquire(uniqueKey('refused')));
      expect(error.code).toBe('AUTH_FAILED');
      const shown = [String(error), error.stack ?? '', inspect(error, { depth: 10, showHidden: true })];
      for (let cause: unknown = error.cause; cause; cause = (cause as Error).cause)
        shown.push(String(cause), (cause as Error).stack ?? '');
      const text = shown.join('\n');
      expect([...leaked(text, wrong), ...leaked(text, PASSWORD)]).toEqual([]);
    } finally {
      await provider.close();
    }
  });

  it('the CLI exits 77 for a wrong password and shows it nowhere', async () => {
    const cli = new CliProcesses();
    try {
      const wrong = `wrong-${PASSWORD}`;
      const url = `${as(server, `fencekit:${enc(wrong)}`)}?${verifyFull()}`;
      const out = await cli.run(['lock', uniqueKey('cli'), '--wait', '60000', '--', 'true'], {
        env: { FENCEKIT_URL: url },
      });
      expect(out.code, out.stderr).toBe(77);
      expect(out.stderr).toMatch(/password authentication failed/);
      expect(leaked(`${out.stdout}\n${out.stderr}`, wrong)).toEqual([]);
    } finally {
      await cli.stop();
    }
  });
});

describe('the two forms of TLS are never mixed', () => {
  it.each([
    () => `${as(server)}?tls=1&${verifyFull()}`,
    () => `${as(server)}?ca=${certs.caFile}&sslrootcert=${certs.caFile}`,
  ])('%#: INVALID_ARGUMENT before any connection', async (url) => {
    const { error } = await failure(() => connect(url()));
    expect(error.code).toBe('INVALID_ARGUMENT');
  });
});
