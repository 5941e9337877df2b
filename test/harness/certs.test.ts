import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { makeTestCertificates } from '../servers/certs.js';

describe('test certificates', () => {
  it('the server certificate chains to the CA and is made out for loopback; the others are what they say', async () => {
    const certs = await makeTestCertificates();
    try {
      const ca = new X509Certificate(certs.ca);
      const server = new X509Certificate(certs.server.cert);
      expect(server.verify(ca.publicKey)).toBe(true);
      expect(server.checkIP('127.0.0.1')).toBe('127.0.0.1');
      expect(server.checkHost('localhost')).toBe('localhost');
      const other = new X509Certificate(certs.otherHost.cert);
      expect(other.checkIP('127.0.0.1')).toBeUndefined();
      const untrusted = new X509Certificate(certs.untrustedClient.cert);
      expect(untrusted.verify(ca.publicKey)).toBe(false);
    } finally {
      await certs.remove();
    }
  });
});
