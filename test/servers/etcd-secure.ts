import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestCertificates } from './certs.js';
import { startNative } from './native.js';
import type { ServerGroup } from './types.js';

const run = promisify(execFile);

/** The key prefix the least-privilege role of docs/security.md is limited to. */
export const FENCEKIT_PREFIX = 'fencekit/';

/**
 * An etcd that serves clients over TLS only, requires a client certificate (--client-cert-auth)
 * and has auth enabled: `root` (password rootPassword), and `fencekit` (password) whose role may
 * read and write FENCEKIT_PREFIX only. A client certificate's CN is a user name too (CN=fencekit).
 */
export async function startSecureEtcd(
  certs: TestCertificates,
  options: { password: string; rootPassword: string },
): Promise<ServerGroup> {
  const group = await startNative('etcd', ['1'], { ETCD_TLS_DIR: certs.dir });
  try {
    const endpoints = group.vars.get('ETCD_ENDPOINTS') as string;
    const etcdctl = (...args: string[]) =>
      run(
        'etcdctl',
        [
          '--endpoints',
          endpoints,
          '--cacert',
          certs.caFile,
          '--cert',
          certs.client.certFile,
          '--key',
          certs.client.keyFile,
          ...args,
        ],
        { env: { ...process.env, ETCDCTL_API: '3' }, timeout: 30_000 },
      );
    await etcdctl('user', 'add', `root:${options.rootPassword}`);
    await etcdctl('role', 'add', 'fencekit');
    await etcdctl('role', 'grant-permission', 'fencekit', 'readwrite', '--prefix=true', FENCEKIT_PREFIX);
    await etcdctl('user', 'add', `fencekit:${options.password}`);
    await etcdctl('user', 'grant-role', 'fencekit', 'fencekit');
    await etcdctl('auth', 'enable');
    return group;
  } catch (error) {
    await group.stop();
    throw error;
  }
}
