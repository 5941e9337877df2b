import { parseConnectionUrl } from './connection-url.js';
import { MIN_SEARCHED } from './secret-mask.js';

/**
 * Connection URLs as they may be shown: the only way a URL reaches a message, an event, a log line
 * or the terminal. A password with an unescaped / ? # or @ can move into what looks like a host or
 * a path, so only a URL that parses whole is shown, and only its scheme and hosts, with the whole
 * user-info replaced; of a string that does not parse nothing is shown at all.
 */

const MASK = '***';

/** What stands for a URL that cannot be shown. */
export const UNREADABLE_URL = '(a URL that is not of the form scheme://host[:port])';

/** `scheme://***@host:port,…`, or UNREADABLE_URL: never the password, the path or the query. */
export function displayUrl(url: unknown): string {
  if (typeof url !== 'string') return UNREADABLE_URL;
  let spec: ReturnType<typeof parseConnectionUrl>;
  try {
    spec = parseConnectionUrl(url);
  } catch {
    return UNREADABLE_URL;
  }
  const scheme = /^[a-z][a-z0-9+.-]*/i.exec(url.trim())?.[0].toLowerCase() ?? '';
  const credentials = urlCredentials(url);
  // A host spelled like the password is masked too: the password must not show in any form. A
  // short one only when it is the whole host (it would match ordinary host names by chance).
  const shows = (part: string, secret: string) =>
    secret.length >= MIN_SEARCHED ? part.includes(secret) : part === secret;
  const shown = (part: string) => (credentials.some((secret) => shows(part, secret)) ? MASK : part);
  const hosts =
    spec.backend === 'memory'
      ? [shown(spec.path)]
      : spec.hosts.map(({ host, port }) => `${shown(host.includes(':') ? `[${host}]` : host)}:${port}`);
  const userinfo = spec.username !== undefined || spec.password !== undefined ? `${MASK}@` : '';
  return `${scheme}://${userinfo}${hosts.join(',')}`;
}

/**
 * Every form (as written, %-decoded, %-encoded) of the credentials in a URL-ish string, for
 * masking text that may quote it. Malformed strings are read leniently: `postgres//u:p/w@h` and
 * `postgres://u:p?w@h` still give `p/w` and `p?w`. Every length counts: a password is a secret
 * however short (SecretMask decides where a short one is looked for).
 */
export function urlCredentials(url: string): string[] {
  const rest = url.trim().replace(/^[a-z][a-z0-9+.-]*:?\/*/i, '');
  const found = new Set<string>();
  // The user-info ends at the last '@' of the authority (as WHATWG URL reads it), or, when the
  // password itself holds a / ? or #, at the last '@' of the whole string.
  const authority = /^[^/?#]*/.exec(rest)?.[0] ?? '';
  for (const end of [authority.lastIndexOf('@'), rest.lastIndexOf('@')]) {
    if (end < 0) continue;
    const userinfo = rest.slice(0, end);
    const colon = userinfo.indexOf(':');
    if (colon < 0) continue; // a user name alone is no secret
    for (const form of spellings(userinfo.slice(colon + 1))) if (form.length > 0) found.add(form);
  }
  // Longest first, so that a masker replaces a secret whole before a part of it.
  return [...found].sort((a, b) => b.length - a.length);
}

function spellings(secret: string): string[] {
  const forms = [secret, encodeURIComponent(secret)];
  try {
    const decoded = decodeURIComponent(secret);
    forms.push(decoded, encodeURIComponent(decoded));
  } catch {
    // a malformed %-escape: the password is used as written
  }
  return forms;
}
