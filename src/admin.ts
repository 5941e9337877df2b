/** The operator's tools on a provider: forceRelease's arguments, its audit record, list's prefix. */

import { hostname, userInfo } from 'node:os';
import { InvalidArgumentError } from './errors.js';
import type { BackendName, ForceReleaseOptions, HolderInfo } from './types.js';
import { MAX_KEY_BYTES, MAX_OWNER_BYTES } from './validate.js';

/** Longest `reason` text in UTF-8 bytes: it goes into a log line and an event, not into storage. */
export const MAX_REASON_BYTES = 1024;

export interface ValidForceRelease {
  reason: string;
  by: string;
  /** Remove the grant only if it still has this token (as inspect showed it). */
  fencingToken: bigint | undefined;
}

const KNOWN_OPTIONS = new Set(['reason', 'by', 'fencingToken']);

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/;

/** A forced release must say why: the reason is what the audit record is for. */
export function validateForceReleaseOptions(options: unknown): ValidForceRelease {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('options', 'forceRelease needs { reason } saying why');
  }
  for (const name of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(name)) throw new InvalidArgumentError('options', `unknown option "${name}"`);
  }
  const { reason, by, fencingToken } = options as Partial<ForceReleaseOptions>;
  if (typeof reason !== 'string' || reason.trim() === '') {
    throw new InvalidArgumentError('reason', 'a force-release needs a non-empty reason (it is recorded)');
  }
  if (Buffer.byteLength(reason, 'utf8') > MAX_REASON_BYTES) {
    throw new InvalidArgumentError('reason', `longer than ${MAX_REASON_BYTES} bytes`);
  }
  if (by !== undefined && (typeof by !== 'string' || by.trim() === '')) {
    throw new InvalidArgumentError('by', 'expected a non-empty string (user@host)');
  }
  if (by !== undefined && Buffer.byteLength(by, 'utf8') > MAX_OWNER_BYTES) {
    throw new InvalidArgumentError('by', `longer than ${MAX_OWNER_BYTES} bytes`);
  }
  if (fencingToken !== undefined && (typeof fencingToken !== 'bigint' || fencingToken < 1n)) {
    throw new InvalidArgumentError('fencingToken', 'expected a positive bigint (the token inspect shows)');
  }
  return { reason: reason.trim(), by: by ?? thisProcess(), fencingToken };
}

/** Who asked, when the caller does not say: user@host and pid of this process. */
function thisProcess(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // no passwd entry (containers): the pid and host still identify the process
  }
  return `${user}@${hostname()} pid ${process.pid}`;
}

/** list()'s prefix: any start of a valid name ('' for all). */
export function validateListPrefix(prefix: unknown): string {
  if (prefix === undefined) return '';
  if (typeof prefix !== 'string') {
    throw new InvalidArgumentError('prefix', `expected a string, got ${typeof prefix}`);
  }
  if (Buffer.byteLength(prefix, 'utf8') > MAX_KEY_BYTES) {
    throw new InvalidArgumentError('prefix', `longer than ${MAX_KEY_BYTES} bytes`);
  }
  if (CONTROL_CHARS.test(prefix)) throw new InvalidArgumentError('prefix', 'contains a control character');
  return prefix;
}

/** The audit line of a force-release: who, why, and what was removed. */
export function forceReleaseLine(
  backend: BackendName,
  key: string,
  removed: HolderInfo,
  request: ValidForceRelease,
): string {
  const owner = removed.owner === undefined ? 'no owner text' : `owner ${JSON.stringify(removed.owner)}`;
  return (
    `fencekit: ${backend} lock ${JSON.stringify(key)} (token ${removed.fencingToken}, ${owner}) ` +
    `force-released by ${JSON.stringify(request.by)}: ${JSON.stringify(request.reason)}`
  );
}

/** The audit line of a force-release whose outcome is unknown (no answer in time, connection lost). */
export function forceReleaseUnknownLine(
  backend: BackendName,
  key: string,
  request: ValidForceRelease,
  error: unknown,
): string {
  const guard = request.fencingToken === undefined ? '' : ` (token ${request.fencingToken})`;
  return (
    `fencekit: ${backend} lock ${JSON.stringify(key)}${guard} force-release by ${JSON.stringify(request.by)} ` +
    `(${JSON.stringify(request.reason)}) has an unknown outcome (${errorCode(error)}): it may have been applied`
  );
}

/** The error's code or name only: its message may carry an address with credentials. */
function errorCode(error: unknown): string {
  const e = error as { code?: unknown; name?: unknown } | null;
  return String(e?.code ?? e?.name ?? 'error');
}

/** Sorted, without duplicates, only names under prefix: what every backend's list() returns. */
export function heldNamesUnder(prefix: string, names: Iterable<string>): string[] {
  return [...new Set(names)].filter((name) => name.startsWith(prefix)).sort();
}
