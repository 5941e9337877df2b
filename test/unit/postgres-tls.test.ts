import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ConnectionOptions, checkServerIdentity, type PeerCertificate } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/connect.js';
import { parseConnectionUrl } from '../../src/connection-url.js';
import type { FencekitError } from '../../src/errors.js';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import { postgresTls } from '../../src/postgres-tls.js';
import { processSecrets } from '../../src/secret-mask.js';
import type { TlsOptions } from '../../src/tls.js';

// How a postgres:// URL and the tls option become pg's ssl object and connection string. No server:
// the files are stand-ins, read and handed on, never parsed as certificates here.
const KEY_TEXT = '-----BEGIN PRIVATE KEY-----\npostgres-key-secret-0815\n-----END PRIVATE KEY-----\n';
let dir: string;
let ca = '';
let cert = '';
let key = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fencekit-pg-tls-'));
  [ca, cert, key] = ['ca.pem', 'cert.pem', 'key.pem'].map((name) => join(dir, name)) as [
    string,
    string,
    string,
  ];
  await writeFile(ca, 'CA-PEM');
  await writeFile(cert, 'CERT-PEM');
  await writeFile(key, KEY_TEXT);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const BASE = 'postgres://app:p%40ss@db.internal:5433/orders';
const read = (url: string, given?: TlsOptions | boolean) => postgresTls(parseConnectionUrl(url), given);
const sslOf = async (url: string, given?: TlsOptions | boolean) =>
  (await read(url, given)).ssl as ConnectionOptions;
const refusal = (run: () => Promise<unknown>) =>
  run().then(
    () => 'no error',
    (error: FencekitError) => `${error.code}: ${error.message}`,
  );

/**
 * Whether a connection to db.internal with `ssl` takes a certificate made out for `name` only (Node
 * checks with tls.checkServerIdentity unless `ssl` brings its own check).
 */
const acceptsCertificateFor = (ssl: ConnectionOptions, name: string) =>
  (ssl.checkServerIdentity ?? checkServerIdentity)('db.internal', {
    subject: { CN: name },
    subjectaltname: `DNS:${name}`,
  } as unknown as PeerCertificate) === undefined;

describe('postgres: neither form', () => {
  it('leaves the URL as it is and ssl to pg (pool.ssl, PGSSLMODE)', async () => {
    const url = `${BASE}?application_name=billing`;
    expect(await read(url)).toEqual({ connectionString: url, ssl: undefined });
  });
});

describe("postgres: fencekit's form", () => {
  it('tls=1&ca= verifies against that authority and the host; the parameters leave the URL', async () => {
    const { connectionString, ssl } = await read(`${BASE}?tls=1&ca=${ca}&application_name=billing`);
    expect(connectionString).toBe(`${BASE}?application_name=billing`);
    expect(String((ssl as ConnectionOptions).ca)).toBe('CA-PEM');
    // Node's defaults: verified, and for the host pg connects to.
    expect(ssl).not.toHaveProperty('rejectUnauthorized');
    expect(acceptsCertificateFor(ssl as ConnectionOptions, 'other.invalid')).toBe(false);
  });

  it('cert= and key= are the client certificate; the key is masked from then on', async () => {
    const ssl = await sslOf(`${BASE}?ca=${ca}&cert=${cert}&key=${key}`);
    expect([String(ssl.cert), String(ssl.key)]).toEqual(['CERT-PEM', KEY_TEXT]);
    expect(processSecrets.text(`oops ${KEY_TEXT}`)).not.toContain('postgres-key-secret-0815');
  });

  it('servername= is the name the certificate is checked for', async () => {
    const ssl = await sslOf(`${BASE}?ca=${ca}&servername=pg.example`);
    expect(acceptsCertificateFor(ssl, 'pg.example')).toBe(true);
    expect(acceptsCertificateFor(ssl, 'db.internal')).toBe(false);
  });

  it('the tls option alone, or over the URL field by field', async () => {
    expect(await sslOf(BASE, true)).toEqual({});
    expect(await sslOf(BASE, { ca: 'OPTION-CA', rejectUnauthorized: false })).toEqual({
      ca: 'OPTION-CA',
      rejectUnauthorized: false,
    });
    const merged = await sslOf(`${BASE}?ca=${ca}&cert=${cert}&key=${key}`, { ca: 'OPTION-CA' });
    expect([String(merged.ca), String(merged.cert)]).toEqual(['OPTION-CA', 'CERT-PEM']);
  });

  it('tls: false and tls=0 are plain, whatever else the URL says', async () => {
    expect(await read(`${BASE}?tls=1&ca=${ca}`, false)).toEqual({ connectionString: BASE, ssl: false });
    expect(await read(`${BASE}?tls=0`)).toEqual({ connectionString: BASE, ssl: false });
  });
});

describe("postgres: PostgreSQL's form, with libpq's meaning", () => {
  it('verify-full: the authority, and the host name checked', async () => {
    const { connectionString, ssl } = await read(`${BASE}?sslmode=verify-full&sslrootcert=${ca}`);
    expect(connectionString).toBe(BASE);
    expect(String((ssl as ConnectionOptions).ca)).toBe('CA-PEM');
    expect(ssl).not.toHaveProperty('rejectUnauthorized');
    expect(acceptsCertificateFor(ssl as ConnectionOptions, 'db.internal')).toBe(true);
    expect(acceptsCertificateFor(ssl as ConnectionOptions, 'other.invalid')).toBe(false);
  });

  it('verify-ca: the authority, any host name', async () => {
    const ssl = await sslOf(`${BASE}?sslmode=verify-ca&sslrootcert=${ca}`);
    expect(String(ssl.ca)).toBe('CA-PEM');
    expect(ssl.rejectUnauthorized).toBeUndefined();
    expect(acceptsCertificateFor(ssl, 'other.invalid')).toBe(true);
  });

  it('require: encrypted, unchecked; with sslrootcert= as verify-ca', async () => {
    expect(await sslOf(`${BASE}?sslmode=require`)).toEqual({ rejectUnauthorized: false });
    const withRoot = await sslOf(`${BASE}?sslmode=require&sslrootcert=${ca}`);
    expect(withRoot.rejectUnauthorized).toBeUndefined();
    expect(acceptsCertificateFor(withRoot, 'other.invalid')).toBe(true);
  });

  it('disable is plain; sslcert= and sslkey= are the client certificate', async () => {
    expect(await sslOf(`${BASE}?sslmode=disable&sslrootcert=${ca}`)).toBe(false);
    const ssl = await sslOf(`${BASE}?sslmode=verify-full&sslrootcert=${ca}&sslcert=${cert}&sslkey=${key}`);
    expect([String(ssl.cert), String(ssl.key)]).toEqual(['CERT-PEM', KEY_TEXT]);
  });

  it("without sslmode=, its companions and pg's ssl=true mean verify-full; ssl=0 is plain", async () => {
    expect(String((await sslOf(`${BASE}?sslrootcert=${ca}`)).ca)).toBe('CA-PEM');
    expect(await sslOf(`${BASE}?ssl=true`)).toEqual({});
    expect(await sslOf(`${BASE}?ssl=0`)).toBe(false);
    expect(await sslOf(`${BASE}?sslmode=verify-full&sslrootcert=system`)).toEqual({});
  });

  it.each([
    ['sslmode=prefer', /sslmode= takes disable, require, verify-ca, verify-full/],
    ['sslmode=allow', /fall back to a plain connection/],
    ['sslmode=no-verify', /sslmode= takes/],
    ['sslmode=verify-ca', /verify-ca needs sslrootcert=/],
    ['sslmode=require&sslrootcert=system', /sslrootcert=system goes with sslmode=verify-full only/],
    ['sslmode=require&sslcert=/x.pem', /sslcert= and sslkey= go together/],
    [
      'sslmode=verify-full&sslrootcert=/nonexistent/ca.pem',
      /the file that sslrootcert= names cannot be read/,
    ],
    ['ssl=maybe', /ssl= takes 1, true, 0 or false/],
    ['sslnegotiation=direct', /sslnegotiation= is not supported/],
  ])('%s is refused', async (query, why) => {
    const said = await refusal(() => read(`${BASE}?${query}`));
    expect(said).toMatch(/^INVALID_ARGUMENT: invalid url: /);
    expect(said).toMatch(why);
  });
});

describe('postgres: the two forms are never mixed', () => {
  it.each([
    [
      'URL and URL',
      () => read(`${BASE}?tls=1&sslmode=require`),
      /\(tls=\) cannot go with PostgreSQL's sslmode=/,
    ],
    ['ca= and sslrootcert=', () => read(`${BASE}?ca=${ca}&sslrootcert=${ca}`), /\(ca=\).*sslrootcert=/],
    ['the option and the URL', () => read(`${BASE}?sslmode=verify-full`, { ca: 'X' }), /the tls option/],
    ['tls: false and sslmode=', () => read(`${BASE}?sslmode=require`, false), /the tls option/],
  ])('%s: INVALID_ARGUMENT', async (_what, run, why) => {
    const said = await refusal(run);
    expect(said).toMatch(/^INVALID_ARGUMENT: /);
    expect(said).toMatch(why);
  });
});

describe('postgres: what connect() and the idempotency store hand to pg', () => {
  it("the provider's pool gets the ssl object and the URL without the parameters read", async () => {
    const provider = await connect(`postgres://app@127.0.0.1:1/db?tls=1&ca=${ca}&servername=pg.example`);
    try {
      const options = (
        provider as unknown as { pool: { options: { connectionString: string; ssl: unknown } } }
      ).pool.options;
      expect(options.connectionString).toBe('postgres://app@127.0.0.1:1/db');
      expect(String((options.ssl as ConnectionOptions).ca)).toBe('CA-PEM');
    } finally {
      await provider.close();
    }
  });

  it('mixing is refused by connect(), by the store, and pool.ssl with TLS asked for', async () => {
    const mixed = `postgres://app@127.0.0.1:1/db?tls=1&sslmode=require`;
    expect(await refusal(() => connect(mixed))).toMatch(/^INVALID_ARGUMENT: /);
    expect(await refusal(() => createIdempotencyStore(mixed))).toMatch(/^INVALID_ARGUMENT: /);
    expect(
      await refusal(() => connect('postgres://app@127.0.0.1:1/db?sslmode=require', { pool: { ssl: true } })),
    ).toMatch(/^INVALID_ARGUMENT: invalid pool: ssl cannot go with TLS/);
  });
});

describe('new PostgresLockProvider({ connectionString })', () => {
  it("refuses fencekit's TLS parameters, which pg would ignore (a plain connection)", async () => {
    const { PostgresLockProvider } = await import('../../adapters/postgres/index.js');
    for (const query of ['tls=1', 'ca=/etc/ca.pem', 'sslmode=disable&servername=db']) {
      expect(
        () => new PostgresLockProvider({ connectionString: `postgres://app@127.0.0.1:1/db?${query}` }),
        query,
      ).toThrow(/invalid connectionString: .* are read by connect\(\), not here/);
    }
  });
});
