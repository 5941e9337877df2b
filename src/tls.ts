/**
 * TLS settings, said one way for every backend: provider options (`tls: { ca, cert, key, … }`
 * with contents) or URL parameters (`tls=1`, `ca=`, `cert=`, `key=`, `servername=` naming files;
 * `rediss://`). Each adapter hands the result to its client.
 */
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import type { ConnectionSpec } from './connection-url.js';
import { InvalidArgumentError } from './errors.js';
import { processSecrets } from './secret-mask.js';

/** A PEM text or its bytes. */
export type Pem = string | Buffer;

/**
 * TLS towards the backend. Given at all (even `{}`), the connection is TLS, verified against the
 * system's certificate authorities unless `ca` names others.
 */
export interface TlsOptions {
  /** The certificate authorities that the server's certificate must chain to (PEM). */
  ca?: Pem | Pem[];
  /** The client certificate (PEM), for servers that require one (mutual TLS). */
  cert?: Pem;
  /** The client certificate's private key (PEM). Never printed. */
  key?: Pem;
  /** The name the server's certificate must be made out for, when it is not the URL's host. */
  servername?: string;
  /**
   * `false` accepts any server certificate: for a throwaway test only, never in production (anyone
   * on the path can then read and change the traffic). Default `true`.
   */
  rejectUnauthorized?: boolean;
}

/** URL parameters that name a file whose contents become the TLS option of the same name. */
const FILE_PARAMS = ['ca', 'cert', 'key'] as const;

/**
 * The TLS settings for a connection: the URL's (`rediss://`, `tls=1`, and `ca=`, `cert=`, `key=`
 * files read here, `servername=`), overridden field by field by the `tls` option. undefined: plain
 * TCP. `tls: false` turns TLS off whatever the URL says.
 */
export async function resolveTls(
  spec: ConnectionSpec,
  given: TlsOptions | boolean | undefined,
): Promise<TlsOptions | undefined> {
  if (given === false) return undefined;
  if (given !== undefined && given !== true) validateTlsOptions(given);
  const fromUrl = await tlsFromUrl(spec);
  if (given === undefined) return fromUrl;
  const merged: TlsOptions = { ...fromUrl, ...(given === true ? {} : given) };
  if (merged.key !== undefined) maskKey(merged.key);
  return merged;
}

/** The URL's TLS settings, or undefined when the URL asks for none. */
async function tlsFromUrl(spec: ConnectionSpec): Promise<TlsOptions | undefined> {
  const params = spec.params;
  const flag = params.get('tls');
  if (flag !== null && !/^(1|true|0|false)$/i.test(flag))
    throw new InvalidArgumentError('url', 'tls= takes 1, true, 0 or false');
  const named = FILE_PARAMS.filter((name) => params.get(name) !== null);
  const servername = params.get('servername');
  const asked =
    /^rediss(\+cluster)?:/i.test(spec.url.trim()) ||
    /^(1|true)$/i.test(flag ?? '') ||
    named.length > 0 ||
    servername !== null;
  if (!asked) return undefined;
  if (/^(0|false)$/i.test(flag ?? '') && (named.length > 0 || servername !== null))
    throw new InvalidArgumentError('url', 'tls=0 cannot go with ca=, cert=, key= or servername=');
  const tls: TlsOptions = {};
  for (const name of named) {
    const path = params.get(name) ?? '';
    tls[name] = await readPemParam(path, name, { privateKey: name === 'key' });
  }
  if (servername !== null) {
    if (servername === '') throw new InvalidArgumentError('url', 'servername= needs a host name');
    tls.servername = servername;
  }
  if ((tls.cert === undefined) !== (tls.key === undefined))
    throw new InvalidArgumentError('url', 'cert= and key= go together (a client certificate and its key)');
  return tls;
}

/**
 * The PEM file that the URL parameter `name=` names. A private key's contents are masked in every
 * output from here on.
 */
export async function readPemParam(
  path: string,
  name: string,
  options: { privateKey: boolean },
): Promise<Buffer> {
  if (path === '') throw new InvalidArgumentError('url', `${name}= needs a file name`);
  let contents: Buffer;
  try {
    contents = await readFile(path);
  } catch (error) {
    // The file's name is not a secret, but its contents may be: only the reason is said.
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new InvalidArgumentError('url', `the file that ${name}= names cannot be read (${code})`);
  }
  if (options.privateKey) maskKey(contents);
  return contents;
}

/** A private key is masked whole and line by line (a message may quote a part of it). */
function maskKey(key: Pem): void {
  const text = String(key);
  const lines = text.split(/\r?\n/).filter((line) => line.trim() !== '' && !line.startsWith('-----'));
  processSecrets.add([text, ...lines]);
}

/** Checks a `tls` option's shape; errors name the field, never its contents. */
export function validateTlsOptions(tls: unknown): asserts tls is TlsOptions {
  if (typeof tls !== 'object' || tls === null || Array.isArray(tls))
    throw new InvalidArgumentError(
      'tls',
      'must be an object ({ ca, cert, key, servername, rejectUnauthorized }) or a boolean',
    );
  const known = new Set(['ca', 'cert', 'key', 'servername', 'rejectUnauthorized']);
  for (const [field, value] of Object.entries(tls)) {
    if (!known.has(field)) throw new InvalidArgumentError('tls', `unknown field "${field}"`);
    if (value === undefined) continue;
    const pem = (v: unknown) => typeof v === 'string' || Buffer.isBuffer(v);
    const ok =
      field === 'servername'
        ? typeof value === 'string' && value !== ''
        : field === 'rejectUnauthorized'
          ? typeof value === 'boolean'
          : field === 'ca'
            ? pem(value) || (Array.isArray(value) && value.every(pem))
            : pem(value);
    if (!ok) throw new InvalidArgumentError('tls', `${field} has the wrong type`);
  }
  const { cert, key } = tls as TlsOptions;
  if ((cert === undefined) !== (key === undefined))
    throw new InvalidArgumentError('tls', 'cert and key go together (a client certificate and its key)');
}

/**
 * Refuses PEM that Node cannot use (not PEM, a key that does not match its certificate) here, as
 * bad input, instead of at each connection attempt, where it would throw from inside a client or
 * be retried as an outage. The error gives OpenSSL's code, never the PEM.
 */
export function assertUsable(tls: TlsOptions): void {
  const { ca, cert, key } = tls;
  if (ca === undefined && cert === undefined) return;
  try {
    createSecureContext({
      ...(ca === undefined ? {} : { ca }),
      ...(cert === undefined ? {} : { cert, key }),
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unusable';
    throw new InvalidArgumentError(
      'tls',
      `the certificate authorities, certificate or key cannot be used (${code}): PEM files, and the key of that certificate`,
    );
  }
}

/**
 * A provider's `tls` option as TlsOptions: undefined or false is none, true is `{}` (the system's
 * authorities), an object is checked.
 */
export function tlsOption(tls: TlsOptions | boolean | undefined): TlsOptions | undefined {
  if (tls === undefined || tls === false) return undefined;
  if (tls === true) return {};
  validateTlsOptions(tls);
  return tls;
}

/** Node's TLS options for a client, from TlsOptions (fields left out when not given). */
export function nodeTlsOptions(tls: TlsOptions): {
  ca?: Pem | Pem[];
  cert?: Pem;
  key?: Pem;
  servername?: string;
  rejectUnauthorized?: boolean;
} {
  return Object.fromEntries(Object.entries(tls).filter(([, value]) => value !== undefined));
}

/** TLS errors that say the other side's certificate (or ours) was not accepted. */
const CERTIFICATE_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  // The server refused our client certificate, or that we gave none.
  'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
  'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
  'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
  'ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN',
  'ERR_SSL_TLSV1_ALERT_ACCESS_DENIED',
]);

/** certificateRefusal for a client that reports TLS failures as text only (gRPC: "Last error: …"). */
export function certificateRefusalIn(text: string): string | undefined {
  for (const code of CERTIFICATE_CODES) {
    if (text.includes(code)) return certificateRefusal({ code });
  }
  return undefined;
}

/**
 * Why a connection's TLS handshake was refused over a certificate (untrusted, expired, made out
 * for another host, or ours refused), looking down the cause chain; undefined for anything else
 * (a TLS port that is not one, a reset: outages or configuration, not identity).
 */
export function certificateRefusal(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && CERTIFICATE_CODES.has(code)) {
      return code.startsWith('ERR_SSL_')
        ? `the server refused the client certificate, or that none was given (${code})`
        : `the server's certificate was not accepted (${code})`;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
