/**
 * TLS towards PostgreSQL, decided here and not by pg: pg's reading of `sslmode=` differs between
 * its versions (pg 8 verifies for `require` too, and with `uselibpqcompat` it follows libpq), so
 * the same URL would mean another thing after an upgrade of pg. Two forms, never mixed:
 * - fencekit's, as on every backend: `tls=1`, `ca=`, `cert=`, `key=`, `servername=` and the `tls`
 *   option (src/tls.ts);
 * - PostgreSQL's own, with libpq's meaning: `sslmode=`, `sslrootcert=`, `sslcert=`, `sslkey=`.
 * Either becomes pg's `ssl` object, and the parameters read here leave the connection string that
 * pg sees, so that pg cannot read them a second time its own way.
 */
import { type ConnectionOptions, checkServerIdentity } from 'node:tls';
import type { ConnectionSpec } from './connection-url.js';
import { InvalidArgumentError } from './errors.js';
import { nodeTlsOptions, readPemParam, resolveTls, type TlsOptions } from './tls.js';

/** What pg gets: its connection string and its `ssl` option. */
export interface PostgresConnection {
  /** The URL without the TLS parameters read here. */
  connectionString: string;
  /**
   * pg's `ssl`: false for a plain connection; undefined when neither the URL nor the `tls` option
   * speaks of TLS, which leaves pg's defaults (a `pool.ssl` option, PGSSLMODE).
   */
  ssl: ConnectionOptions | false | undefined;
}

const FENCEKIT_PARAMS = ['tls', 'ca', 'cert', 'key', 'servername'];
/** `ssl=` is pg's own shorthand (`ssl=true`), read as PostgreSQL's form. */
const POSTGRES_PARAMS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'ssl'];
const SSLMODES = ['disable', 'require', 'verify-ca', 'verify-full'];

/**
 * The connection string and `ssl` for pg, from the URL and the `tls` option. `tls: false` is a
 * plain connection; fencekit's form and PostgreSQL's together are an InvalidArgumentError.
 */
export async function postgresTls(
  spec: ConnectionSpec,
  given: TlsOptions | boolean | undefined,
): Promise<PostgresConnection> {
  const has = (name: string) => spec.params.has(name);
  const fencekit = FENCEKIT_PARAMS.filter(has);
  const postgres = POSTGRES_PARAMS.filter(has);
  if (postgres.length > 0 && (fencekit.length > 0 || given !== undefined))
    throw new InvalidArgumentError(
      given === undefined ? 'url' : 'tls',
      `fencekit's TLS (${given === undefined ? fencekit.map((p) => `${p}=`).join(', ') : 'the tls option'}) cannot go with PostgreSQL's ${postgres.map((p) => `${p}=`).join(', ')}: use one or the other`,
    );
  // pg would turn TLS on by itself for this one, over the ssl decided here.
  if (has('sslnegotiation'))
    throw new InvalidArgumentError('url', 'sslnegotiation= is not supported (the usual negotiation is used)');
  const connectionString = withoutParams(spec.url, new Set([...FENCEKIT_PARAMS, ...POSTGRES_PARAMS]));
  if (postgres.length > 0) return { connectionString, ssl: await fromSslMode(spec.params) };
  if (fencekit.length === 0 && given === undefined) return { connectionString, ssl: undefined };
  const tls = await resolveTls(spec, given);
  return { connectionString, ssl: tls === undefined ? false : fromTlsOptions(tls) };
}

/** pg's `ssl` for fencekit's TlsOptions: `servername` is the name the certificate is checked for. */
function fromTlsOptions(tls: TlsOptions): ConnectionOptions {
  const { servername, ...rest } = nodeTlsOptions(tls);
  // Not passed as `servername`: pg replaces that with the URL's host name.
  return servername === undefined
    ? rest
    : { ...rest, checkServerIdentity: (_host, cert) => checkServerIdentity(servername, cert) };
}

/**
 * libpq's `sslmode=`: `disable` is plain; `require` encrypts without checking the certificate,
 * unless `sslrootcert=` is given (then as `verify-ca`, as libpq does); `verify-ca` checks that the
 * certificate chains to `sslrootcert=`; `verify-full` also checks that it is made out for the host.
 * `allow` and `prefer` fall back to a plain connection, which fencekit never does: refused. Without
 * `sslmode=`, its companions (or `ssl=true`) mean `verify-full`. `sslrootcert=system` is the
 * system's authorities, with `verify-full` only, as in libpq 16.
 */
async function fromSslMode(params: URLSearchParams): Promise<ConnectionOptions | false> {
  const mode = params.get('sslmode') ?? impliedMode(params.get('ssl'));
  if (!SSLMODES.includes(mode))
    throw new InvalidArgumentError(
      'url',
      `sslmode= takes ${SSLMODES.join(', ')} (allow and prefer would fall back to a plain connection)`,
    );
  if (mode === 'disable') return false;
  const rootcert = params.get('sslrootcert');
  const certFile = params.get('sslcert');
  const keyFile = params.get('sslkey');
  if ((certFile === null) !== (keyFile === null))
    throw new InvalidArgumentError(
      'url',
      'sslcert= and sslkey= go together (a client certificate and its key)',
    );
  if (mode === 'verify-ca' && rootcert === null)
    throw new InvalidArgumentError(
      'url',
      'sslmode=verify-ca needs sslrootcert= naming your own authority (any certificate a public one signed would pass)',
    );
  if (rootcert === 'system' && mode !== 'verify-full')
    throw new InvalidArgumentError(
      'url',
      'sslrootcert=system goes with sslmode=verify-full only, as in libpq',
    );
  const ssl: ConnectionOptions = {};
  if (rootcert !== null && rootcert !== 'system')
    ssl.ca = await readPemParam(rootcert, 'sslrootcert', { privateKey: false });
  if (certFile !== null && keyFile !== null) {
    ssl.cert = await readPemParam(certFile, 'sslcert', { privateKey: false });
    ssl.key = await readPemParam(keyFile, 'sslkey', { privateKey: true });
  }
  if (mode === 'require' && rootcert === null) ssl.rejectUnauthorized = false;
  else if (mode !== 'verify-full') ssl.checkServerIdentity = () => undefined;
  return ssl;
}

/** The mode pg's `ssl=` shorthand stands for (absent: the companions alone ask for TLS). */
function impliedMode(ssl: string | null): string {
  if (ssl === null || /^(1|true)$/i.test(ssl)) return 'verify-full';
  if (/^(0|false)$/i.test(ssl)) return 'disable';
  throw new InvalidArgumentError('url', 'ssl= takes 1, true, 0 or false');
}

/** The URL without the query parameters named (the others kept as written). */
function withoutParams(url: string, names: Set<string>): string {
  const text = url.trim();
  const start = text.indexOf('?'); // the first: no '?' comes before the query (connection-url.ts)
  if (start < 0) return text;
  const kept = text
    .slice(start + 1)
    .split('&')
    .filter((pair) => pair !== '' && !names.has(new URLSearchParams(pair).keys().next().value ?? ''));
  return kept.length === 0 ? text.slice(0, start) : `${text.slice(0, start)}?${kept.join('&')}`;
}
