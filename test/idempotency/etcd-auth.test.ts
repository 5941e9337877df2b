import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import { expectNoSecret, failure } from '../adapters/refusals.js';
import { makeTestCertificates, type TestCertificates } from '../servers/certs.js';
import { startSecureEtcd } from '../servers/etcd-secure.js';
import type { ServerGroup } from '../servers/types.js';

// The idempotency store on an etcd with TLS, client certificates and auth, as docs/security.md sets
// it up: the least-privilege role (readwrite on fencekit/) covers the store's default prefix.
const PASSWORD = 'pw-SECRET-2718';

let certs: TestCertificates;
let etcd: ServerGroup;
const host = () => (etcd.vars.get('ETCD_ENDPOINTS') as string).replace(/^https:\/\//, '');
const files = () => `ca=${certs.caFile}&cert=${certs.client.certFile}&key=${certs.client.keyFile}`;

beforeAll(async () => {
  certs = await makeTestCertificates();
  etcd = await startSecureEtcd(certs, { password: PASSWORD, rootPassword: 'root-SECRET-1414' });
}, 120_000);
afterAll(async () => {
  await etcd?.stop();
  await certs?.remove();
});

describe('the idempotency store on a secured etcd', () => {
  it.each([
    ['the default prefix', ''],
    ['the namespace of docs/security.md', '&namespace=fencekit%2F'],
  ])('runs and replays under the least-privilege role, with %s', async (_what, namespace) => {
    const store = await createIdempotencyStore(
      `etcd://fencekit:${PASSWORD}@${host()}?${files()}${namespace}`,
    );
    try {
      const k = `tls-${crypto.randomUUID()}`;
      expect(await store.run(k, 'p', () => 'charged')).toBe('charged');
      expect(await store.execute(k, 'p', () => 'again')).toEqual({ value: 'charged', replayed: true });
    } finally {
      await store.close();
    }
  });

  it.each([
    [
      'a wrong password',
      () => `etcd://fencekit:not-${PASSWORD}@${host()}?${files()}`,
      {},
      /password was refused/,
    ],
    [
      'a prefix outside the role',
      () => `etcd://fencekit:${PASSWORD}@${host()}?${files()}`,
      { prefix: 'other/' },
      /role does not allow/,
    ],
  ])('%s is AUTH_FAILED, runs nothing and shows no secret', async (_what, url, options, why) => {
    const store = await createIdempotencyStore(url(), { callTimeoutMs: 2_000, ...options });
    let runs = 0;
    try {
      const { error } = await failure(() => store.run(`refused-${crypto.randomUUID()}`, 'p', () => runs++));
      expect(error.code).toBe('AUTH_FAILED');
      expect(error.message).toMatch(why);
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
      expect(runs).toBe(0);
    } finally {
      await store.close();
    }
  });
});
