/**
 * The credentials this process was given (URL passwords, password and digest options), masked in
 * the message and the cause chain of every FencekitError (src/errors.ts). A driver's message may
 * quote a host spelled like the password, an older pg-connection-string keeps the whole URL in a
 * TypeError's `input`, and errors are built in too many places to hand the secrets to each one.
 * Kept for the life of the process, as the clients that use them keep them.
 */

const MASK = '***';
/** How far down a cause chain masking looks; a chain is cut below that. */
const MAX_DEPTH = 5;

const known = new Set<string>();
/** Longest first, so that a secret that contains another is masked whole. */
let longestFirst: string[] = [];

/** Adds secrets to mask from now on; values shorter than 3 characters would mask ordinary words. */
export function rememberSecrets(secrets: Iterable<string>): void {
  const before = known.size;
  for (const secret of secrets) if (secret.length >= 3) known.add(secret);
  if (known.size !== before) longestFirst = [...known].sort((a, b) => b.length - a.length);
}

export function maskSecrets(text: string): string {
  let out = text;
  for (const secret of longestFirst) if (out.includes(secret)) out = out.split(secret).join(MASK);
  return out;
}

/** The cause itself when it shows no known secret, else a copy (of its chain too) that does not. */
export function maskedCause(cause: unknown, depth = 0): unknown {
  if (longestFirst.length === 0) return cause;
  if (depth > MAX_DEPTH) return undefined; // deeper than anyone reads: cut rather than check
  if (typeof cause === 'string') return maskSecrets(cause);
  if (!(cause instanceof Error)) return cause;
  const nested = maskedCause(cause.cause, depth + 1);
  const fields = Object.entries(cause);
  const shows = (value: unknown) => typeof value === 'string' && maskSecrets(value) !== value;
  if (nested === cause.cause && ![cause.message, cause.stack, ...fields.map(([, v]) => v)].some(shows))
    return cause;
  const copy = new Error(maskSecrets(cause.message), nested === undefined ? undefined : { cause: nested });
  copy.name = cause.name;
  copy.stack = maskSecrets(cause.stack ?? '');
  // Codes, errno, address …: the plain fields, masked; objects (a client, a config) are left out.
  for (const [field, value] of fields)
    if (value === null || typeof value !== 'object') {
      Object.assign(copy, { [field]: typeof value === 'string' ? maskSecrets(value) : value });
    }
  return copy;
}
