/**
 * Keeps credentials out of log lines and events: a provider's options may carry URL passwords
 * (redis://:pw@…, postgres://u:pw@…), an etcd password or ZooKeeper digest credentials (user:pw).
 */

import { urlCredentials } from '../url-display.js';

const MASK = '***';
/** user:password@ in any URL-like text: the password goes even when we never saw it. */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]*:)[^\s/@]*@/gi;
/** How deep secretsIn looks into an options object (clients and pools are skipped). */
const MAX_DEPTH = 4;

export class Redactor {
  readonly #secrets: string[];

  constructor(secrets: Iterable<string>) {
    const all = new Set<string>();
    for (const secret of secrets) {
      // Short values would mask ordinary words; a password of 1-2 characters is no secret anyway.
      if (secret.length < 3) continue;
      all.add(secret);
      all.add(encodeURIComponent(secret));
    }
    // Longest first, so that a secret containing another is masked whole.
    this.#secrets = [...all].sort((a, b) => b.length - a.length);
  }

  text(value: string): string {
    let out = value.replace(URL_PASSWORD, `$1${MASK}@`);
    for (const secret of this.#secrets) out = out.split(secret).join(MASK);
    return out;
  }

  /** The error itself when it says nothing secret, else a copy (name, code, message) that does not. */
  error(error: unknown): unknown {
    if (!(error instanceof Error)) return typeof error === 'string' ? this.text(error) : error;
    const message = this.text(error.message);
    if (message === error.message) return error;
    const copy = new Error(message);
    copy.name = error.name;
    const code = (error as { code?: unknown }).code;
    if (code !== undefined) Object.assign(copy, { code });
    return copy;
  }
}

/**
 * Credentials found in a provider's options: fields named password/digest/auth, and passwords in
 * URL strings, malformed ones too (`postgres//u:p/w@h`). Only plain objects and arrays are walked
 * (never clients, pools or buffers).
 */
export function secretsIn(options: unknown): string[] {
  const found: string[] = [];
  const walk = (value: unknown, field: string, depth: number): void => {
    if (typeof value === 'string') {
      if (/^(password|digest|auth|pass|secret)$/i.test(field)) {
        found.push(value);
        // ZooKeeper digest 'user:password': the password alone must not show either.
        const colon = value.indexOf(':');
        if (field.toLowerCase() === 'digest' && colon >= 0) found.push(value.slice(colon + 1));
      }
      if (/^[a-z][a-z0-9+.-]*:/i.test(value)) found.push(...urlCredentials(value));
      return;
    }
    if (depth >= MAX_DEPTH || value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) {
      for (const item of value) walk(item, field, depth + 1);
      return;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return;
    for (const [key, item] of Object.entries(value)) walk(item, key, depth + 1);
  };
  walk(options, '', 0);
  return found;
}
