import { inspect } from 'node:util';

/**
 * Decides whether a value shows a credential this process was given, and masks it: the one check
 * behind every error, event, log line, metric attribute and CLI line that leaves fencekit.
 *
 * A value shows a secret when its util.inspect (hidden fields, six levels deep), its String() or
 * its stack does: a driver's error may keep one far from its message (ioredis's `command.args`
 * of an AUTH, a client's `options`, a pg `config`). Such a value is replaced by a masked copy; a
 * value that shows none is kept as it is.
 *
 * Which occurrences count depends on the secret's length, so that short ones mask no ordinary text:
 * - any length: the password of a URL's user-info (`scheme://user:pw@`, even one never given to
 *   us; a given one also with a / ? or # in it), a field named like a password, and a secret that
 *   stands whole in quotes, alone (`'pw'`, `"pw"`, as inspect and JSON quote a string and drivers
 *   quote a value) or after a user name (a ZooKeeper digest `'user:pw'`);
 * - only secrets of MIN_SEARCHED characters or more are searched for inside other text: a message,
 *   a stack's frame lines (file paths), where a short one would match by chance.
 *
 * Detecting and masking share one rule: text() masks every occurrence that shows() counts, so a
 * value found to show a secret never keeps it in its masked copy.
 */

const MASK = '***';
/** Shorter secrets are masked only where they stand whole (see above). */
export const MIN_SEARCHED = 6;
/** How far down a cause chain masking looks; a chain is cut below that. */
const MAX_DEPTH = 5;
/** user:password@ in any URL-like text: the password goes even when we never saw it. */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]*:)[^\s/@]*@/gi;
/** Fields whose value is a credential whatever it is. */
const SECRET_FIELD = /^(password|passwd|pass|secret|digest|auth|token|credentials?)$/i;
const LEFT_OUT = '(a value that showed a credential, left out)';

export class SecretMask {
  /** Spellings of every secret of MIN_SEARCHED characters or more, longest first. */
  #searched: string[] = [];
  /** The secrets (as given and %-encoded) shorter than that: matched whole only. */
  readonly #short = new Set<string>();
  /** Where a short secret stands whole (see above); null while there is none. */
  #shortWhole: RegExp | null = null;

  constructor(secrets: Iterable<string> = []) {
    this.add(secrets);
  }

  /** Masks these from now on too. */
  add(secrets: Iterable<string>): void {
    const searched = new Set(this.#searched);
    for (const secret of secrets)
      for (const form of spellings(secret)) {
        if (form.length >= MIN_SEARCHED) searched.add(form);
        else if (form.length > 0) this.#short.add(form);
      }
    if (searched.size !== this.#searched.length)
      this.#searched = [...searched].sort((a, b) => b.length - a.length);
    this.#shortWhole = wholePattern(this.#short);
  }

  /** Text with every URL password, every short secret standing whole and every searched-for one replaced by `***`. */
  text(value: string): string {
    let out = value.replace(URL_PASSWORD, `$1${MASK}@`);
    if (this.#shortWhole)
      out = out.replace(this.#shortWhole, (_whole, open = '', user = '', close = '') =>
        open ? `${open}${user}${MASK}${close}` : `:${MASK}@`,
      );
    for (const secret of this.#searched) if (out.includes(secret)) out = out.split(secret).join(MASK);
    return out;
  }

  /** Whether the value shows a known secret, or a URL password, anywhere a reader could look. */
  shows(value: unknown): boolean {
    if (value === null || value === undefined) return false;
    if (typeof value === 'string') return this.text(value) !== value || this.#short.has(value);
    if (typeof value !== 'object' && typeof value !== 'function') return false;
    let inspected: string;
    try {
      inspected = inspect(value, { showHidden: true, depth: 6 });
    } catch {
      return true; // a value that cannot be looked at may hold anything
    }
    const texts = [inspected, safeString(value), (value as { stack?: unknown }).stack];
    return texts.some((text) => typeof text === 'string' && this.text(text) !== text);
  }

  /**
   * The value itself when it shows no secret, else a copy that does not: an error keeps its name,
   * message, stack, plain fields and cause chain (each masked), and loses the fields that hold
   * objects (a client, a config, a command with its arguments). Other values that show one become
   * a note saying so.
   */
  value(value: unknown, depth = 0): unknown {
    if (depth > MAX_DEPTH) return undefined; // deeper than anyone reads: cut rather than check
    if (typeof value === 'string') return this.#string(value);
    if (!this.shows(value)) return value;
    if (!(value instanceof Error)) return LEFT_OUT;
    const cause = 'cause' in value ? this.value(value.cause, depth + 1) : undefined;
    const copy = new Error(this.#string(value.message), cause === undefined ? undefined : { cause });
    copy.name = this.#string(value.name);
    copy.stack = this.text(value.stack ?? '');
    // Codes, errno, address …: the plain fields, masked; objects are left out.
    for (const [field, plain] of Object.entries(value)) {
      if (field === 'cause' || (plain !== null && typeof plain === 'object') || typeof plain === 'function')
        continue;
      Object.assign(copy, { [field]: this.#field(field, plain) });
    }
    return copy;
  }

  /** A string masked, and masked whole when it is a short secret (inspect quotes a hidden message). */
  #string(value: string): string {
    return this.#short.has(value) ? MASK : this.text(value);
  }

  #field(field: string, plain: unknown): unknown {
    if (SECRET_FIELD.test(field) && plain !== undefined && plain !== null && plain !== '') return MASK;
    return typeof plain === 'string' ? this.value(plain) : plain;
  }
}

/**
 * A short secret standing whole: in matching quotes, alone or after a `user:` (a digest), or between
 * a user-info's ':' and '@' (URL_PASSWORD stops at a / in it). Longest first, so a secret goes whole
 * before one that is part of it.
 */
function wholePattern(short: ReadonlySet<string>): RegExp | null {
  if (short.size === 0) return null;
  const secrets = [...short]
    .sort((a, b) => b.length - a.length)
    .map((secret) => secret.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
    .join('|');
  return new RegExp(`(['"\`])([^'"\`\\s:@]*:)?(?:${secrets})(\\1)|:(?:${secrets})@`, 'g');
}

/** A secret as given, %-encoded, and as inspect/JSON escape it inside a quoted string. */
function spellings(secret: string): string[] {
  return [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)];
}

function safeString(value: unknown): string | undefined {
  try {
    return String(value);
  } catch {
    return undefined;
  }
}

/**
 * The credentials this process was given (URL passwords, password, digest and auth options),
 * masked in every FencekitError's message and causes (src/errors.ts) and by every Redactor. Errors
 * are built in too many places to hand the secrets to each one. Kept for the life of the process,
 * as the clients that use them keep them.
 */
export const processSecrets = new SecretMask();
