import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../src/errors.js';
import { canonicalJson, payloadHash } from '../../src/idempotency/hash.js';

/** The definition, written the slow and obvious way: JSON with every object's keys sorted. */
function reference(value: unknown): string {
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  const record = value as Record<string, unknown>;
  return `{${Object.keys(record)
    .filter((k) => record[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${reference(record[k])}`)
    .join(',')}}`;
}

const data = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.string({ unit: 'binary' }),
    fc.date({ noInvalidDate: true }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), fc.option(tie('value'), { nil: undefined }), {
      maxKeys: 6,
    }),
  ),
})).value;

describe('canonicalJson', () => {
  it('is JSON with sorted keys, for any data (fast-check, 2,000 cases)', () => {
    fc.assert(
      // In a list: a top-level string or byte array is hashed as it is, not as JSON.
      fc.property(fc.array(data, { maxLength: 3 }), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 2_000, seed: 20261202 },
    );
  });

  it('does not depend on the order keys were added in', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 0, y: 1 }], c: 2 } })).toBe(
      canonicalJson({ a: { c: 2, d: [1, { y: 1, z: 0 }] }, b: 1 }),
    );
    expect(canonicalJson({ b: 1, a: undefined, '10': 0, '9': 0 })).toBe('{"10":0,"9":0,"b":1}');
  });

  it('names where a value cannot be hashed, as a typed error', () => {
    const refused = (payload: unknown) => {
      try {
        canonicalJson(payload);
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidArgumentError);
        return (error as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refused({ a: [1, { b: Number.NaN }] })).toContain('at $.a[1].b: NaN is not a finite number');
    expect(refused([1n])).toContain('at $[0]: a bigint has no JSON form');
    expect(refused({ f: () => 1 })).toContain('at $.f: a function has no JSON form');
    expect(refused({ m: new Map() })).toContain('at $.m: a Map instance is not plain data');
    const cycle: Record<string, unknown> = { x: { y: [] } };
    (cycle.x as { y: unknown[] }).y.push(cycle);
    expect(refused(cycle)).toContain('at $.x.y[0]: it refers to itself (a cycle)');
    expect(refused(Number.POSITIVE_INFINITY)).toContain('at $: Infinity is not a finite number');
  });

  it('keeps an array hole empty, as the first version did (records stored then still match)', () => {
    // biome-ignore lint/suspicious/noSparseArray: the hole is the case under test
    expect(canonicalJson([1, , 3])).toBe('[1,,3]');
    expect(canonicalJson({ a: new Array(2) })).toBe('{"a":[,]}');
  });

  it('allows the same object twice when it is not its own ancestor', () => {
    const shared = { n: 1 };
    expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe('{"a":{"n":1},"b":[{"n":1},{"n":1}]}');
  });

  it('refuses through payloadHash too', () => {
    expect(() => payloadHash({ deep: { n: Number.NaN } }, canonicalJson)).toThrow(/at \$\.deep\.n/);
  });
});
