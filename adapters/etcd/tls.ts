import { rootCertificates } from 'node:tls';
import type { IOptions } from 'etcd3';
import { InvalidArgumentError } from '../../src/errors.js';
import { type TlsOptions, tlsOption } from '../../src/tls.js';

/** The etcd3 client's `credentials` (and the name to check) for the tls option; undefined: none. */
export function etcdTls(
  tls: TlsOptions | boolean | undefined,
): { credentials: NonNullable<IOptions['credentials']>; servername?: string } | undefined {
  const given = tlsOption(tls);
  if (given === undefined) return undefined;
  if (given.rejectUnauthorized === false)
    throw new InvalidArgumentError(
      'tls',
      'rejectUnauthorized: false is not offered for etcd (gRPC always verifies)',
    );
  const ca = Array.isArray(given.ca) ? given.ca.map(String).join('\n') : given.ca;
  return {
    credentials: {
      // gRPC takes no "system authorities" default: without ca, Node's bundled roots.
      rootCertificate: Buffer.from(ca === undefined ? rootCertificates.join('\n') : ca),
      ...(given.cert === undefined ? {} : { certChain: Buffer.from(given.cert) }),
      ...(given.key === undefined ? {} : { privateKey: Buffer.from(given.key) }),
    },
    ...(given.servername === undefined ? {} : { servername: given.servername }),
  };
}
