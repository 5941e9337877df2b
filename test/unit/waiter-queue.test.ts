import { describe, expect, it } from 'vitest';
import { arrivalOf, ownerOfSpec } from '../../adapters/redis/scripts.js';
import { decodeHolder } from '../../src/holder-record.js';
import { DEFAULT_QUEUE_LIMIT, lineUp, validateQueueOptions } from '../../src/waiter-queue.js';

describe('queue(): options', () => {
  it('takes a positive integer limit, 100 by default, and refuses the rest', () => {
    expect(validateQueueOptions(undefined)).toBe(DEFAULT_QUEUE_LIMIT);
    expect(validateQueueOptions({})).toBe(DEFAULT_QUEUE_LIMIT);
    expect(validateQueueOptions({ limit: 1 })).toBe(1);
    for (const bad of [0, -2, 2.5, Number.NaN, Number.POSITIVE_INFINITY, '5', 10_001]) {
      expect(() => validateQueueOptions({ limit: bad })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    }
    expect(() => validateQueueOptions({ limt: 3 })).toThrow(/unknown option "limt"/);
    expect(() => validateQueueOptions(3)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe("queue(): a process's line", () => {
  const other = { owner: 'b', since: undefined, ours: false };
  const ours = { owner: 'a', since: undefined, ours: true };

  it('our entry stands for our whole line; another process’s is unknown where it may have one', () => {
    expect(lineUp([other, ours], 2, 10).map((entry) => entry.requests)).toEqual([undefined, 3]);
  });

  it('a line whose turn is not queued (it holds) queues after everyone there now: one entry at the end', () => {
    const queue = lineUp([other], 2, 10);
    expect(queue).toEqual([
      { owner: 'b', since: undefined, requests: undefined },
      { owner: undefined, since: undefined, requests: 2 },
    ]);
    expect(lineUp([other], 2, 1)).toHaveLength(1);
    expect(lineUp([], 0, 10)).toEqual([]);
  });
});

describe('queue(): what a server sends is not trusted', () => {
  it("a Redis waiter's pending spec gives its owner, or undefined when it is not in the form", () => {
    expect(ownerOfSpec('1000 7 channel alice')).toBe('alice');
    expect(ownerOfSpec('1000:50 0  bob smith')).toBe('bob smith');
    expect(ownerOfSpec('1000 4 chä älice')).toBe('älice'); // the length counts bytes, as Lua does
    expect(ownerOfSpec('1000 7 channel ')).toBeUndefined();
    for (const garbage of [
      null,
      false,
      42,
      '',
      'garbage',
      '1000 99 short owner',
      '1000 x chan o',
      '1000 3 chanx',
    ]) {
      expect(ownerOfSpec(garbage)).toBeUndefined();
    }
  });

  it("a Redis waiter's arrival score gives its since, or undefined when it is not one", () => {
    expect(arrivalOf('1767225600000000')?.toISOString()).toBe('2026-01-01T00:00:00.000Z');
    for (const garbage of [null, 5, '', 'x', '-1', '1e9', '12345678901234567890123']) {
      expect(arrivalOf(garbage)).toBeUndefined();
    }
  });

  it('a stored holder with a malformed owner or since reads as unknown', () => {
    const stored = (value: string) => decodeHolder(Buffer.from(value));
    expect(stored('{"fencekit":1,"owner":42,"since":"not a date"}')).toEqual({
      owner: undefined,
      since: undefined,
    });
    expect(stored('{"fencekit":1,"owner":"a","since":7}')).toEqual({ owner: 'a', since: undefined });
    expect(stored('{"fencekit":1,"owner":"a","since":"2026-01-01T00:00:00.000Z"}').since?.toISOString()).toBe(
      '2026-01-01T00:00:00.000Z',
    );
  });
});
