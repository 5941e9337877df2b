import * as crypto from 'node:crypto';
import { InvalidArgumentError } from '../errors.js';

/** Turns a payload into the bytes whose SHA-256 identifies it. Replace it to choose your own canonical form. */
export type Canonicalize = (payload: unknown) => string | Uint8Array;

/**
 * The default canonical form: JSON with object keys sorted, so `{a,b}` and `{b,a}` are one payload.
 * Bytes (Buffer, Uint8Array) and strings are taken as they are. Values JSON cannot represent
 * faithfully (bigint, functions, symbols, NaN, cycles) are refused rather than silently dropped.
 */
export function canonicalJson(payload: unknown): string | Uint8Array {
  if (payload instanceof Uint8Array || typeof payload === 'string') return payload;
  try {
    return encode(payload, []);
  } catch (error) {
    throw error instanceof Unhashable ? refusal(error) : error;
  }
}

/**
 * One pass, one string. `ancestors` holds the objects being encoded (to refuse cycles); the error
 * path is worked out only when a value is refused, so a payload that hashes builds no path strings.
 */
function encode(value: unknown, ancestors: object[]): string {
  if (value === null || typeof value === 'boolean') return value === null ? 'null' : String(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Unhashable(`${value} is not a finite number`);
    return JSON.stringify(value);
  }
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value !== 'object') throw new Unhashable(`a ${typeof value} has no JSON form`);
  if (ancestors.includes(value)) throw new Unhashable('it refers to itself (a cycle)');
  ancestors.push(value);
  let out: string;
  if (Array.isArray(value)) {
    out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      if (i in value) out += within(i, value[i], ancestors); // a hole stays empty, as join() has it
    }
    out += ']';
  } else if (value instanceof Date) {
    out = JSON.stringify(value.toISOString());
  } else {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null)
      throw new Unhashable(`a ${proto?.constructor?.name ?? 'class'} instance is not plain data`);
    const record = value as Record<string, unknown>;
    const keys = sortedInPlace(Object.keys(record));
    out = '{';
    for (const key of keys) {
      const item = record[key];
      if (item === undefined) continue; // as JSON.stringify: an undefined property is left out
      if (out.length > 1) out += ',';
      out += `${JSON.stringify(key)}:${within(key, item, ancestors)}`;
    }
    out += '}';
  }
  ancestors.pop();
  return out;
}

/**
 * The order of `keys.sort()`, in place. Payloads have a handful of keys: insertion sort allocates
 * nothing, where Array.prototype.sort allocates a work area on every call (about 0.9 KB here).
 */
function sortedInPlace(keys: string[]): string[] {
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i] as string;
    let j = i - 1;
    for (; j >= 0 && (keys[j] as string) > key; j--) keys[j + 1] = keys[j] as string;
    keys[j + 1] = key;
  }
  return keys;
}

/** Encodes a member, adding its step to the path of a refusal on the way out. */
function within(step: string | number, value: unknown, ancestors: object[]): string {
  try {
    return encode(value, ancestors);
  } catch (error) {
    if (error instanceof Unhashable) error.steps.unshift(step);
    throw error;
  }
}

class Unhashable extends Error {
  readonly steps: (string | number)[] = [];
}

function refusal(error: Unhashable): InvalidArgumentError {
  const path = error.steps.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`)).join('');
  return new InvalidArgumentError('payload', `cannot be hashed at $${path}: ${error.message}`);
}

/** SHA-256 of the canonical form, hex. */
export function payloadHash(payload: unknown, canonicalize: Canonicalize): string {
  let form: string | Uint8Array;
  try {
    form = canonicalize(payload);
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw error;
    throw new InvalidArgumentError('payload', `cannot be hashed: ${(error as Error)?.message ?? error}`);
  }
  if (typeof form !== 'string' && !(form instanceof Uint8Array))
    throw new InvalidArgumentError('payload', 'the canonical form must be a string or bytes');
  return sha256Hex(form);
}

// One-shot hashing (Node >= 20.12) skips making a Hash object per payload; older Node 20 falls back.
const oneShot = (
  crypto as { hash?: (algorithm: string, data: string | Uint8Array, encoding: 'hex') => string }
).hash;
const sha256Hex = oneShot
  ? (form: string | Uint8Array) => oneShot('sha256', form, 'hex')
  : (form: string | Uint8Array) => crypto.createHash('sha256').update(form).digest('hex');
