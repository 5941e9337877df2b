import type { TestCertificates } from './certs.js';
import { startNative } from './native.js';
import type { ServerGroup } from './types.js';

/**
 * A ZooKeeper that serves clients over TLS only (a secureClientPort, no clientPort) with one of
 * certs.sh's certificates (default `server`, made out for 127.0.0.1 and localhost). clientAuth
 * 'need' (the default) requires a client certificate signed by certs.sh's authority. ZK_CONNECT
 * names the secure ports.
 */
export function startSecureZooKeeper(
  certs: TestCertificates,
  options: {
    nodes?: 1 | 3;
    clientAuth?: 'need' | 'none';
    certificate?: 'server' | 'other-host';
    protocol?: 'TLSv1.3';
  } = {},
): Promise<ServerGroup> {
  return startNative('zookeeper', [String(options.nodes ?? 1)], {
    ZK_TLS_DIR: certs.dir,
    ZK_TLS_CLIENT_AUTH: options.clientAuth ?? 'need',
    ZK_TLS_CERT: options.certificate ?? 'server',
    ...(options.protocol ? { ZK_TLS_PROTOCOL: options.protocol } : {}),
  });
}
