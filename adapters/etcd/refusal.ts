import { AuthenticationError } from '../../src/errors.js';
import { certificateRefusal, certificateRefusalIn } from '../../src/tls.js';

/**
 * Why etcd refused who we are (a wrong password, a role without fencekit's keys, a certificate),
 * looking down the cause chain; undefined when the error is not a refusal. gRPC reports some TLS
 * failures only as text ("Last error: …"), and some not at all ("Last error: null": an untrusted
 * server certificate, a missing client certificate): those stay outages.
 */
export function etcdRefusal(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    const name = (e as { constructor?: { name?: string } }).constructor?.name;
    const message = String((e as { message?: unknown }).message ?? '');
    if (name === 'EtcdAuthenticationFailedError' || /invalid user ID or password/.test(message))
      return 'the user name or password was refused';
    if (name === 'EtcdPermissionDeniedError' || /etcdserver: permission denied/.test(message))
      return "the user's role does not allow a key fencekit uses (docs/security.md)";
    if (/etcdserver: user name is empty/.test(message))
      return 'the server requires a user name and password, or a client certificate';
    const certificate = certificateRefusal(e) ?? certificateRefusalIn(message);
    if (certificate) return certificate;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** An AuthenticationError for a refusal (see etcdRefusal), else the error as it is. */
export function refusedOr(error: unknown, host: string): unknown {
  if (error instanceof AuthenticationError) return error;
  const why = etcdRefusal(error);
  return why === undefined ? error : new AuthenticationError('etcd', host, why, { cause: error });
}

/**
 * Whether gRPC failed to connect without saying why ("No connection established", or the etcd3
 * client's circuit breaker opened by such failures): a refused certificate and an outage look
 * alike there (see tls-probe.ts).
 */
export function unexplainedConnectFailure(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    const message = String((e as { message?: unknown }).message ?? '');
    if (/No connection established|circuit breaker is open/.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
