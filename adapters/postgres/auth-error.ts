import { AuthenticationError } from '../../src/errors.js';

/** SQLSTATEs that say the server refused who we are, not that it is away. */
const REFUSED_SQLSTATES: Record<string, string> = {
  '28P01': 'password authentication failed',
  '28000': 'connection refused by pg_hba.conf or the role',
  '42501': 'insufficient privilege',
};

/** Node TLS error codes of a certificate that did not verify. */
const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * An AuthenticationError when `error` is a refusal of credentials or certificates, else undefined.
 * "The server does not support SSL connections" counts as refused: the client demands TLS and the
 * server will never offer it, so retrying cannot help (a configuration error, not an outage).
 * The message quotes only the SQLSTATE or error code, never the server's text, which may echo input.
 */
export function authenticationError(error: unknown, host: string): AuthenticationError | undefined {
  const e = error as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const message = typeof e?.message === 'string' ? e.message : '';
  let why: string | undefined;
  if (code && code in REFUSED_SQLSTATES) why = `${REFUSED_SQLSTATES[code]} (${code})`;
  else if (code && TLS_CODES.has(code)) why = `server certificate not accepted (${code})`;
  else if (message.includes('does not support SSL')) why = 'TLS required but the server does not offer it';
  return why === undefined ? undefined : new AuthenticationError('postgres', host, why, { cause: error });
}

/** `host:port` of pool options for error messages, without user info. */
export function whereOf(
  options: { host?: string; port?: number; connectionString?: string } | undefined,
): string {
  if (options?.connectionString) {
    try {
      const url = new URL(options.connectionString);
      if (url.hostname) return `${url.hostname}:${url.port || 5432}`;
    } catch {
      // not a URL (a libpq key=value string): fall through to the fields
    }
  }
  return `${options?.host ?? 'localhost'}:${options?.port ?? 5432}`;
}
