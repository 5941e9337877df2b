/**
 * What PostgreSQL, or the TLS handshake towards it, refused, told apart from an outage; for the
 * provider and the idempotency store alike. A refusal is AUTH_FAILED: retrying cannot help.
 */
import { AuthenticationError } from './errors.js';
import { certificateRefusal } from './tls.js';

/** SQLSTATEs that say the server refused who we are, not that it is away. */
const REFUSED_SQLSTATES: Record<string, string> = {
  '28P01': 'password authentication failed',
  '28000': 'connection refused by pg_hba.conf or the role',
  '42501': 'insufficient privilege',
};

/** pg's own words for what it refuses before the server says anything, and what they mean. */
const CLIENT_REFUSALS: Array<[words: string, why: string]> = [
  ['does not support SSL', 'TLS required but the server does not offer it'],
  // SCRAM asked for a password the URL and options do not give.
  ['client password must be', 'the server asks for a password and none was given'],
];

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
  const why =
    code && code in REFUSED_SQLSTATES
      ? `${REFUSED_SQLSTATES[code]} (${code})`
      : (certificateRefusal(error) ?? CLIENT_REFUSALS.find(([words]) => message.includes(words))?.[1]);
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
