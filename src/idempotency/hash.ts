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
  return encode(payload, new Set(), '$');
}

function encode(value: unknown, seen: Set<object>, path: string): string {
  if (value === null || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw unhashable(path, `${value} is not a finite number`);
    return JSON.stringify(value);
  }
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value !== 'object') throw unhashable(path, `a ${typeof value} has no JSON form`);
  if (seen.has(value)) throw unhashable(path, 'it refers to itself (a cycle)');
  seen.add(value);
  try {
    if (Array.isArray(value)) return `[${value.map((v, i) => encode(v, seen, `${path}[${i}]`)).join(',')}]`;
    if (value instanceof Date) return JSON.stringify(value.toISOString());
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null)
      throw unhashable(path, `a ${proto?.constructor?.name ?? 'class'} instance is not plain data`);
    const entries = Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map(
        (k) => `${JSON.stringify(k)}:${encode((value as Record<string, unknown>)[k], seen, `${path}.${k}`)}`,
      );
    return `{${entries.join(',')}}`;
  } finally {
    seen.delete(value);
  }
}

function unhashable(path: string, why: string): InvalidArgumentError {
  return new InvalidArgumentError('payload', `cannot be hashed at ${path}: ${why}`);
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
