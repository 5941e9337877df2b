import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConnectedSemaphoreProvider, connect, createElection } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { makeTestCertificates, type TestCertificates } from '../servers/certs.js';
import { FENCEKIT_PREFIX, startSecureEtcd } from '../servers/etcd-secure.js';
import type { ServerGroup } from '../servers/types.js';
import { expectNoSecret, failure } from './refusals.js';

// etcd with TLS only, client certificates required and auth enabled; fencekit's user has a role
// limited to its prefix (docs/security.md). Secrets are recognisable, so a test can say none leaked.
const PASSWORD = 'pw-SECRET-4711';

let certs: TestCertificates;
let etcd: ServerGroup;
const host = () => (etcd.vars.get('ETCD_ENDPOINTS') as string).replace(/^https:\/\//, '');
const files = () => `ca=${certs.caFile}&cert=${certs.client.certFile}&key=${certs.client.keyFile}`;
const namespace = `namespace=${encodeURIComponent(FENCEKIT_PREFIX)}`;

beforeAll(async () => {
  certs = await makeTestCertificates();
  etcd = await startSecureEtcd(certs, { password: PASSWORD, rootPassword: 'root-SECRET-0815' });
}, 120_000);
afterAll(async () => {
  await etcd?.stop();
  await certs?.remove();
});

describe('etcd over mutual TLS with a least-privilege user', () => {
  it('a lock, a semaphore, an election and list() work under the role limited to the prefix', async () => {
    const provider = await connect(`etcd://fencekit:${PASSWORD}@${host()}?${files()}&${namespace}`);
    try {
      const key = uniqueKey('tls-lock');
      const lock = await provider.acquire(key);
      expect(await provider.list('')).toContain(key);
      await lock.release();
      const permit = await provider.semaphore(uniqueKey('tls-sem'), { limit: 2 }).acquire();
      await permit.release();
      const leadership = await createElection(provider, uniqueKey('tls-election')).campaign('me');
      expect(leadership.signal.aborted).toBe(false);
      await leadership.resign();
    } finally {
      await provider.close();
    }
  });

  it('the tls option with contents; the client certificate alone names the user (CN=fencekit)', async () => {
    const provider = await connect(`etcd://${host()}?${namespace}`, {
      tls: { ca: certs.ca, cert: certs.client.cert, key: certs.client.key },
    });
    try {
      await (await provider.acquire(uniqueKey('tls-option'))).release();
    } finally {
      await provider.close();
    }
  });
});

describe('what etcd refuses', () => {
  const refused: Array<[string, () => string, RegExp]> = [
    [
      'a wrong password',
      () => `etcd://fencekit:not-${PASSWORD}@${host()}?${files()}&${namespace}`,
      /password was refused/,
    ],
    [
      'keys outside the role',
      () => `etcd://fencekit:${PASSWORD}@${host()}?${files()}&namespace=other%2F`,
      /role does not allow/,
    ],
    [
      'a server certificate made out for another host',
      () => `etcd://fencekit:${PASSWORD}@${host()}?${files()}&${namespace}&servername=other.invalid`,
      /ERR_TLS_CERT_ALTNAME_INVALID/,
    ],
  ];

  it.each(refused)('%s is AUTH_FAILED, at once, and shows no secret', async (_what, url, why) => {
    const provider = await connect(url(), { callTimeoutMs: 2_000 });
    try {
      const { error, ms } = await failure(() => provider.acquire(uniqueKey('refused'), { waitMs: 60_000 }));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(error.message).toMatch(new RegExp(`^etcd at 127\\.0\\.0\\.1:\\d+: .*${why.source}`));
      expect(ms).toBeLessThan(30_000);
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await provider.close();
    }
  });

  const rwOf = (p: ConnectedSemaphoreProvider) => {
    if (!p.readWriteLock) throw new Error('etcd offers read-write locks');
    return p.readWriteLock(uniqueKey('refused-rw'));
  };
  // Every surface over the provider meets the same refusal: none waits it out as an outage.
  const surfaces: Array<[string, (provider: ConnectedSemaphoreProvider) => Promise<unknown>]> = [
    [
      'a semaphore acquire',
      (p) => p.semaphore(uniqueKey('refused-sem'), { limit: 2 }).acquire({ waitMs: 60_000 }),
    ],
    ['a semaphore tryAcquire', (p) => p.semaphore(uniqueKey('refused-sem'), { limit: 2 }).tryAcquire()],
    [
      'an election campaign',
      (p) => createElection(p, uniqueKey('refused-election')).campaign('me', { waitMs: 60_000 }),
    ],
    ['an election leader()', (p) => createElection(p, uniqueKey('refused-election')).leader()],
    [
      'an election observe()',
      (p) => createElection(p, uniqueKey('refused-election')).observe()[Symbol.asyncIterator]().next(),
    ],
    ['a semaphore inspect', (p) => p.semaphore(uniqueKey('refused-sem'), { limit: 2 }).inspect()],
    ['a read-write lock acquireWrite', (p) => rwOf(p).acquireWrite({ waitMs: 60_000 })],
    ['a read-write lock inspect', (p) => rwOf(p).inspect()],
    ['inspect', (p) => p.inspect(uniqueKey('refused'))],
    ['list', (p) => p.list('')],
  ];

  it.each(surfaces)(
    'a wrong password: %s is AUTH_FAILED, at once, and shows no secret',
    async (_what, use) => {
      const provider = await connect(`etcd://fencekit:not-${PASSWORD}@${host()}?${files()}&${namespace}`, {
        callTimeoutMs: 2_000,
      });
      try {
        const { error, ms } = await failure(() => use(provider));
        expect(error.code, error.message).toBe('AUTH_FAILED');
        expect(ms).toBeLessThan(30_000);
        expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
      } finally {
        await provider.close();
      }
    },
  );

  // gRPC reports these without their reason ("Last error: null"); a TLS probe of our own finds it.
  const probed: Array<[string, () => string, RegExp]> = [
    [
      'a server certificate from an authority not trusted',
      () => `etcd://${host()}?cert=${certs.client.certFile}&key=${certs.client.keyFile}`,
      /server's certificate was not accepted/,
    ],
    [
      'no client certificate',
      () => `etcd://fencekit:${PASSWORD}@${host()}?ca=${certs.caFile}&${namespace}`,
      /refused the client certificate, or that none was given/,
    ],
    [
      'a client certificate from an authority the server does not trust',
      () =>
        `etcd://${host()}?ca=${certs.caFile}&cert=${certs.untrustedClient.certFile}&key=${certs.untrustedClient.keyFile}`,
      /refused the client certificate/,
    ],
  ];

  it.each(probed)('%s is AUTH_FAILED, at once, and shows no secret', async (_what, url, why) => {
    const provider = (await connect(url(), { callTimeoutMs: 2_000 })) as ConnectedSemaphoreProvider;
    try {
      for (const use of [
        () => provider.acquire(uniqueKey('refused'), { waitMs: 60_000 }),
        () => provider.semaphore(uniqueKey('refused-sem'), { limit: 1 }).tryAcquire(),
        () => provider.inspect(uniqueKey('refused')),
      ]) {
        const { error, ms } = await failure(use);
        expect(error.code, error.message).toBe('AUTH_FAILED');
        expect(error.message).toMatch(why);
        expect(ms).toBeLessThan(30_000);
        expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
      }
    } finally {
      await provider.close();
    }
  });

  it('a plain connection to the TLS port is a typed outage within callTimeoutMs, not a hang', async () => {
    // Without TLS there is nothing to probe with: a plain client cannot tell this from an outage.
    const provider = await connect(`etcd://fencekit:${PASSWORD}@${host()}`, { callTimeoutMs: 2_000 });
    try {
      const { error } = await failure(() => provider.acquire(uniqueKey('refused'), { waitMs: 60_000 }));
      expect(error.code).toBe('BACKEND_UNAVAILABLE');
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await provider.close();
    }
  });
});
