import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestCertificates } from './certs.js';
import { startNative } from './native.js';
import type { ServerGroup } from './types.js';

/** The role that logs in with the client certificate (CN=fencekit) and no password. */
export const CERT_USER = 'fencekit_cert';

/**
 * A PostgreSQL that takes TLS connections only (hostssl, no plain host line in pg_hba.conf):
 * `fencekit` logs in with `password` (scram-sha-256), CERT_USER with the client certificate; both
 * have the least privilege of docs/security.md (CONNECT, the schema `fencekit`). PG_ADMIN_URL is
 * the superuser over the Unix socket; PG_TLS_URL the server without user (sslmode=verify-full).
 * `otherHost` makes the server show the certificate made out for other.invalid, signed by the
 * same authority: a host-name check must refuse it, a check of the authority alone accepts it.
 */
export async function startSecurePostgres(
  certs: TestCertificates,
  options: { password: string; otherHost?: boolean },
): Promise<ServerGroup> {
  let tlsDir = certs.dir;
  if (options.otherHost) {
    tlsDir = join(certs.dir, 'postgres-other-host');
    await mkdir(tlsDir, { recursive: true });
    await copyFile(certs.caFile, join(tlsDir, 'ca.pem'));
    await copyFile(certs.otherHost.certFile, join(tlsDir, 'server.pem'));
    await copyFile(certs.otherHost.keyFile, join(tlsDir, 'server-key.pem'));
  }
  return startNative('postgres', [], {
    PG_TLS_DIR: tlsDir,
    PG_PASSWORD_AUTH: options.password,
    PG_CERT_USER: CERT_USER,
    PG_CERT_CN: 'fencekit',
  });
}
