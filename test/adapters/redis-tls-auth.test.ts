import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import { connect, createElection } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { makeTestCertificates, type TestCertificates } from '../servers/certs.js';
import { startSecureRedis } from '../servers/redis-secure.js';
import type { ServerGroup } from '../servers/types.js';
import { expectNoSecret, failure } from './refusals.js';

// Redis that requires TLS (no plain port), a client certificate, and an ACL user; fencekit's user
// has only its keys, channels and commands (docs/security.md). Secrets are recognisable, so that a
// test can say none leaked.
const PASSWORD = 'pw-SECRET-4711';
const ADMIN_PASSWORD = 'admin-SECRET-0815';

let certs: TestCertificates;
let single: ServerGroup;
let three: ServerGroup;
const hostOf = (group: ServerGroup) => group.vars.get('REDIS_HOSTS')?.split(',')[0] as string;
const files = () => `ca=${certs.caFile}&cert=${certs.client.certFile}&key=${certs.client.keyFile}`;

beforeAll(async () => {
  certs = await makeTestCertificates();
  [single, three] = await Promise.all([
    startSecureRedis(certs, { password: PASSWORD, adminPassword: ADMIN_PASSWORD, clientCertificates: true }),
    startSecureRedis(certs, { instances: 3, password: PASSWORD, adminPassword: ADMIN_PASSWORD }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([single?.stop(), three?.stop()]);
  await certs?.remove();
});

describe('Redis over TLS with an ACL user', () => {
  it('a lock, a semaphore, an election and list() work with the least-privilege user (mutual TLS, files in the URL)', async () => {
    const provider = await connect(`rediss://fencekit:${PASSWORD}@${hostOf(single)}?${files()}`);
    try {
      const key = uniqueKey('tls-lock');
      const lock = await provider.acquire(key);
      expect(lock.fencingToken).toBeGreaterThan(0n);
      expect(await provider.list('')).toContain(key);
      const waiting = provider.acquire(key, { waitMs: 10_000 });
      await lock.release();
      const next = await waiting; // handed over through the notice channel the ACL allows
      expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
      await next.release();

      const permit = await provider.semaphore(uniqueKey('tls-sem'), { limit: 2 }).acquire();
      await permit.release();

      // Every read-write script: acquire, queue, hand-over with its notice, renew, inspect, list.
      const rw = provider.readWriteLock?.(uniqueKey('tls-rw'));
      if (!rw) throw new Error('no readWriteLock()');
      const read = await rw.acquireRead({ ttlMs: 1_000 });
      const writing = rw.acquireWrite({ waitMs: 10_000 });
      await eventually('the writer queued', async () => (await rw.inspect()).waiters === 1);
      // Past the lease: only renewals the ACL allows keep the read.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(read.held).toBe(true);
      expect(await provider.list('')).toContain(rw.name);
      await read.release();
      const write = await writing;
      expect(write.fencingToken).toBeGreaterThan(read.fencingToken);
      await write.release();

      const leadership = await createElection(provider, uniqueKey('tls-election')).campaign('me');
      expect(leadership.signal.aborted).toBe(false);
      await leadership.resign();
    } finally {
      await provider.close();
    }
  });

  it('the tls option gives the same with contents instead of files', async () => {
    const provider = await connect(`rediss://fencekit:${PASSWORD}@${hostOf(single)}`, {
      tls: { ca: certs.ca, cert: certs.client.cert, key: certs.client.key },
    });
    try {
      await (await provider.acquire(uniqueKey('tls-option'))).release();
    } finally {
      await provider.close();
    }
  });

  it('an idempotency store over TLS with the ACL user (its keys are under fencekit:)', async () => {
    const store = await createIdempotencyStore(`rediss://fencekit:${PASSWORD}@${hostOf(single)}?${files()}`);
    try {
      const key = uniqueKey('tls-idempotency');
      let runs = 0;
      const first = await store.run(key, { order: 42 }, () => ++runs);
      const again = await store.run(key, { order: 42 }, () => ++runs);
      expect([first, again, runs]).toEqual([1, 1, 1]);
    } finally {
      await store.close();
    }
  });

  it('Redlock over three TLS instances with the ACL user', async () => {
    const hosts = three.vars.get('REDIS_HOSTS') as string;
    const provider = await connect(`redlock://fencekit:${PASSWORD}@${hosts}?ca=${certs.caFile}`);
    try {
      const lock = await provider.acquire(uniqueKey('tls-redlock'));
      expect(lock.signal.aborted).toBe(false);
      await lock.release();
    } finally {
      await provider.close();
    }
    const wrong = await connect(`redlock://fencekit:wrong-password-1@${hosts}?ca=${certs.caFile}`);
    try {
      const { error } = await failure(() => wrong.acquire(uniqueKey('tls-redlock'), { waitMs: 60_000 }));
      expect(error.code).toBe('AUTH_FAILED');
      expect(error.message).toMatch(/^redlock at 127\.0\.0\.1:\d+: the user name or password was refused/);
    } finally {
      await wrong.close();
    }
  });
});

describe('what Redis refuses is AUTH_FAILED, at once, and shows no secret', () => {
  const refused: Array<[string, () => string, RegExp]> = [
    [
      'a wrong password',
      () => `rediss://fencekit:not-the-${PASSWORD}@${hostOf(single)}?${files()}`,
      /user name or password was refused/,
    ],
    [
      'no user name and password',
      () => `rediss://${hostOf(single)}?${files()}`,
      /requires a user name and password/,
    ],
    [
      'a server certificate from an authority not trusted',
      () =>
        `rediss://fencekit:${PASSWORD}@${hostOf(single)}?cert=${certs.client.certFile}&key=${certs.client.keyFile}`,
      /certificate was not accepted/,
    ],
    [
      'a server certificate made out for another host',
      () => `rediss://fencekit:${PASSWORD}@${hostOf(single)}?${files()}&servername=other.invalid`,
      /certificate was not accepted \(ERR_TLS_CERT_ALTNAME_INVALID\)/,
    ],
    [
      'a client certificate from an authority the server does not trust',
      () =>
        `rediss://fencekit:${PASSWORD}@${hostOf(single)}?ca=${certs.caFile}&cert=${certs.untrustedClient.certFile}&key=${certs.untrustedClient.keyFile}`,
      /refused the client certificate/,
    ],
    [
      // The ACL allows fencekit:* keys only: a provider with another prefix is refused, not retried.
      'keys outside the ACL',
      () => `rediss://fencekit:${PASSWORD}@${hostOf(single)}?${files()}&prefix=other:`,
      /ACL does not allow/,
    ],
  ];

  it.each(refused)('%s', async (_what, url, why) => {
    // A refused certificate's alert can take seconds on a busy machine: the verdict waits within
    // the call's deadline, so a longer one keeps the verdict from being an outage.
    const provider = await connect(url(), { callTimeoutMs: 10_000 });
    try {
      // A waiting acquire does not retry a refusal for its waitMs (60 s here).
      const { error, ms } = await failure(() => provider.acquire(uniqueKey('refused'), { waitMs: 60_000 }));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(error.message).toMatch(new RegExp(`^redis at 127\\.0\\.0\\.1:\\d+: .*${why.source}`));
      expect(ms).toBeLessThan(30_000);
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await provider.close();
    }
  });

  it.each([
    ['a wrong password', () => `rediss://fencekit:not-the-${PASSWORD}@${hostOf(single)}?${files()}`],
    [
      'keys outside the ACL',
      () => `rediss://fencekit:${PASSWORD}@${hostOf(single)}?${files()}&prefix=other:`,
    ],
  ])('read-write locks: %s is AUTH_FAILED at once too', async (_what, url) => {
    const provider = await connect(url());
    try {
      const rw = provider.readWriteLock?.(uniqueKey('refused-rw'));
      if (!rw) throw new Error('no readWriteLock()');
      const { error, ms } = await failure(() => rw.acquireWrite({ waitMs: 60_000 }));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(ms).toBeLessThan(30_000);
      expect((await failure(() => rw.inspect())).error.code).toBe('AUTH_FAILED');
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await provider.close();
    }
  });

  it('a plain connection to the TLS port is an outage-like typed error within callTimeoutMs, not a hang', async () => {
    const provider = await connect(`redis://fencekit:${PASSWORD}@${hostOf(single)}`, {
      callTimeoutMs: 1_000,
    });
    try {
      const { error } = await failure(() => provider.acquire(uniqueKey('plain'), { waitMs: 60_000 }));
      expect(error.code).toBe('BACKEND_UNAVAILABLE');
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await provider.close();
    }
  });

  it('the ACL refuses fencekit’s user a command outside its rule', async () => {
    const [host, port] = hostOf(single).split(':');
    const raw = new Redis({
      host,
      port: Number(port),
      username: 'fencekit',
      password: PASSWORD,
      tls: { ca: certs.ca, cert: certs.client.cert, key: certs.client.key },
      maxRetriesPerRequest: 0,
    });
    try {
      await expect(raw.flushall()).rejects.toThrow(/NOPERM/);
      await expect(raw.get('other:x')).rejects.toThrow(/NOPERM/); // a key outside fencekit:*
    } finally {
      raw.disconnect();
    }
  });
});
