/**
 * Keeps credentials out of log lines and events: a provider's options may carry URL passwords
 * (redis://:pw@…, postgres://u:pw@…), an etcd password or ZooKeeper digest credentials (user:pw).
 */

import { processSecrets, SecretMask } from '../secret-mask.js';
import { urlCredentials } from '../url-display.js';

/** How deep secretsIn looks into an options object (clients and pools are skipped). */
const MAX_DEPTH = 4;

/**
 * The credentials of one provider's options, and those the process was given, masked by the one
 * SecretMask rule (src/secret-mask.ts) in what its telemetry reports.
 */
export class Redactor {
  readonly #mask: SecretMask;

  constructor(secrets: Iterable<string>) {
    this.#mask = new SecretMask(secrets);
  }

  text(value: string): string {
    return processSecrets.text(this.#mask.text(value));
  }

  /** The value itself when it shows no secret, else a masked copy (see SecretMask.value). */
  error(error: unknown): unknown {
    return processSecrets.value(this.#mask.value(error));
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
