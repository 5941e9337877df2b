import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { makeTestCertificates, type TestCertificates } from '../servers/certs.js';

// PEM that Node cannot use is bad input at construction: before, a ZooKeeper provider retried it
// as an outage for waitMs, and etcd's TLS probe threw it untyped (found by review).
let certs: TestCertificates;
beforeAll(async () => {
  certs = await makeTestCertificates();
}, 60_000);
afterAll(() => certs?.remove());

describe('a tls option Node cannot use', () => {
  const cases = () => ({
    'a key that is not the certificate’s': {
      ca: certs.ca,
      cert: certs.client.cert,
      key: certs.untrustedClient.key,
    },
    'a key that is not PEM': { ca: certs.ca, cert: certs.client.cert, key: Buffer.from('not a key') },
  });

  it.each(['a key that is not the certificate’s', 'a key that is not PEM'])(
    '%s: INVALID_ARGUMENT from the provider, naming no PEM',
    (what) => {
      const tls = cases()[what as keyof ReturnType<typeof cases>];
      for (const make of [
        () => new ZooKeeperLockProvider({ connectString: '127.0.0.1:1', tls }),
        () => new EtcdLockProvider({ endpoints: ['127.0.0.1:1'], tls }),
      ]) {
        let error: (Error & { code?: string }) | undefined;
        try {
          make();
        } catch (e) {
          error = e as Error & { code?: string };
        }
        expect(error?.code, error?.message).toBe('INVALID_ARGUMENT');
        expect(error?.message).toMatch(/cannot be used \((ERR_OSSL|ERR_)/);
        expect(error?.message).not.toContain('BEGIN');
      }
    },
  );
});
