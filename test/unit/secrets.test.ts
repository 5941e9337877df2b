import { inspect } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import { BackendUnavailableError, type ConnectOptions, connect, type LockProvider } from '../../src/index.js';
import { displayUrl } from '../../src/url-display.js';
import { Outputs } from './secret-outputs.js';
import { leaked, SECRET_URLS, type SecretUrl } from './secret-urls.js';

async function throughConnect(url: string, extra: ConnectOptions = {}): Promise<Outputs> {
  const out = new Outputs();
  let provider: LockProvider | undefined;
  try {
    provider = await connect(url, { ...out.options(), ...extra });
    out.listen(provider);
    const lock = await provider.tryAcquire('secrets/k').catch((error: unknown) => out.error(error));
    if (lock) await lock.release();
    await provider.inspect('secrets/k').catch((error: unknown) => out.error(error));
  } catch (error) {
    out.error(error);
  } finally {
    await provider?.close().catch((error: unknown) => out.error(error));
  }
  await out.collectMetrics();
  return out;
}

async function throughStore(url: string): Promise<Outputs> {
  const out = new Outputs();
  try {
    const store = await createIdempotencyStore(url, { callTimeoutMs: 300 });
    try {
      await store.run('secrets-k', { amount: 1 }, async () => 1).catch((error: unknown) => out.error(error));
    } finally {
      await store.close().catch((error: unknown) => out.error(error));
    }
  } catch (error) {
    out.error(error);
  }
  return out;
}

/** The rows whose outputs show the secret, with the forms shown and where. */
function leakingRows(rows: SecretUrl[], outputs: Outputs[]): string[] {
  return rows.flatMap((row, i) => {
    const found = leaked(outputs[i]?.all() ?? '', row.secret);
    return found.length === 0 ? [] : [`${row.name}: ${found.join(', ')}`];
  });
}

const summary: string[] = [];
afterAll(() => {
  if (summary.length > 0) console.log(summary.join('\n'));
});

describe('no password in any output, whatever the URL looks like', () => {
  it('connect(): errors (with their causes), events, log lines and metrics', async () => {
    const outputs = await Promise.all(SECRET_URLS.map((row) => throughConnect(row.url)));
    const leaks = leakingRows(SECRET_URLS, outputs);
    summary.push(`connect(): ${leaks.length} of ${SECRET_URLS.length} rows leak`);
    expect(leaks).toEqual([]);
    // The errors keep their types: a bad URL is INVALID_ARGUMENT, an unreachable server BACKEND_UNAVAILABLE.
    for (const [i, row] of SECRET_URLS.entries()) {
      const codes = new Set(outputs[i]?.codes);
      if (row.name.startsWith('memory with')) expect([...codes], row.name).toEqual([]);
      else expect([...codes].length, row.name).toBe(1);
      for (const code of codes) expect(['INVALID_ARGUMENT', 'BACKEND_UNAVAILABLE'], row.name).toContain(code);
    }
  }, 60_000);

  it('createIdempotencyStore(): errors with their causes', async () => {
    const rows = SECRET_URLS.filter((row) => row.store);
    const outputs = await Promise.all(rows.map((row) => throughStore(row.url)));
    const leaks = leakingRows(rows, outputs);
    summary.push(`createIdempotencyStore(): ${leaks.length} of ${rows.length} rows leak`);
    expect(leaks).toEqual([]);
  }, 60_000);

  it('passwords given as provider options, not in the URL', async () => {
    const secret = 'Qx7FenceKz9Vault';
    const cases: Array<[string, ConnectOptions]> = [
      ['etcd://127.0.0.1:1', { auth: { username: 'root', password: secret } }],
      ['zk://127.0.0.1:1', { digest: `app:${secret}` }],
      ['redis://127.0.0.1:1', { redis: { password: secret } }],
      ['postgres://app@127.0.0.1:1/db', { pool: { password: secret } }],
    ];
    const outputs = await Promise.all(cases.map(([url, options]) => throughConnect(url, options)));
    const leaks = outputs.flatMap((out, i) => (leaked(out.all(), secret).length > 0 ? [cases[i]?.[0]] : []));
    expect(leaks).toEqual([]);
    expect(outputs.every((out) => out.codes.length > 0)).toBe(true);
  }, 60_000);

  it('malformed URLs handed to a provider directly (url, connectionString, endpoints)', async () => {
    const secret = 'Qx7Fence/Kz9Vault';
    const makers: Array<[string, (options: ConnectOptions) => LockProvider]> = [
      [
        'RedisLockProvider url',
        (o) => new RedisLockProvider({ ...o, url: `redis://:${secret}@127.0.0.1:1` }),
      ],
      [
        'PostgresLockProvider connectionString',
        (o) =>
          new PostgresLockProvider({ ...o, connectionString: `postgres://app:${secret}@127.0.0.1:1/db` }),
      ],
      [
        'EtcdLockProvider endpoints',
        (o) => new EtcdLockProvider({ ...o, endpoints: [`http://root:${secret}@127.0.0.1:1`] }),
      ],
    ];
    const leaks: string[] = [];
    const codes: string[] = [];
    for (const [name, make] of makers) {
      const out = new Outputs();
      let provider: LockProvider | undefined;
      try {
        provider = make(out.options());
        await provider.tryAcquire('secrets/k').catch((error: unknown) => out.error(error));
      } catch (error) {
        out.error(error);
      } finally {
        await provider?.close().catch((error: unknown) => out.error(error));
      }
      if (leaked(out.all(), secret).length > 0) leaks.push(name);
      codes.push(`${name}: ${out.codes.join(', ')}`);
    }
    expect(leaks).toEqual([]);
    // Each fails once, with a FencekitError: the URL refused, or no server there.
    for (const line of codes) expect(line).toMatch(/: (INVALID_ARGUMENT|BACKEND_UNAVAILABLE)$/);
  }, 60_000);

  it('a cause that quotes a credential (a TypeError whose input is the URL) is kept as a masked copy', async () => {
    const url = 'memory://app:Wq3CauseSecret@cause-test';
    await (await connect(url)).close(); // the process has now been given this password
    const cause = Object.assign(new TypeError('Invalid URL'), { code: 'ERR_INVALID_URL', input: url });
    const error = new BackendUnavailableError('cannot connect: Invalid URL', { cause });
    expect(leaked(inspect(error, { depth: 10, showHidden: true }), 'Wq3CauseSecret')).toEqual([]);
    expect(error.cause).toMatchObject({
      name: 'TypeError',
      message: 'Invalid URL',
      code: 'ERR_INVALID_URL',
      input: 'memory://app:***@cause-test',
    });
    // A host spelled like the password, in a message fencekit builds from a driver's.
    const refused = new BackendUnavailableError('connect ECONNREFUSED Wq3CauseSecret:5432');
    expect(refused.message).toBe('connect ECONNREFUSED ***:5432');
    expect(refused.stack).not.toContain('Wq3CauseSecret');
    // A cause that shows nothing secret is kept as it is (the rows above gave 127.0.0.1 as a password).
    const harmless = new Error('socket hang up');
    expect(new BackendUnavailableError('cannot connect', { cause: harmless }).cause).toBe(harmless);
  });

  it('displayUrl() shows the scheme and hosts of a URL that parses, nothing of one that does not', () => {
    expect(displayUrl('postgres://app:pw@db.example:5433/orders?sslmode=require')).toBe(
      'postgres://***@db.example:5433',
    );
    expect(displayUrl('etcd://h1,h2:2380')).toBe('etcd://h1:2379,h2:2380');
    expect(displayUrl('redis://:pw@[::1]:6380/2')).toBe('redis://***@[::1]:6380');
    expect(displayUrl('memory://demo')).toBe('memory://demo');
    expect(displayUrl('postgres://app:db-main@db-main/x')).toBe('postgres://***@***:5432');
    for (const row of SECRET_URLS) expect(leaked(displayUrl(row.url), row.secret), row.name).toEqual([]);
    expect(displayUrl('postgres//app:Qx7Fence@db')).not.toContain('Qx7Fence');
  });
});
