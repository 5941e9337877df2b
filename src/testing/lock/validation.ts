import assert from 'node:assert/strict';
import { MAX_KEY_BYTES } from '../../validate.js';
import { rejectsWith, uniqueKey } from '../helpers.js';
import type { LockSuite } from './suite.js';

const INVALID_KEYS: Array<[string, unknown]> = [
  ['empty', ''],
  ['too long', 'k'.repeat(MAX_KEY_BYTES + 1)],
  ['NUL byte', 'a\u0000b'],
  ['newline', 'a\nb'],
  ['parent segment', 'a/../b'],
  ['leading parent', '../etc'],
  ['dot segment', 'a/./b'],
  ['leading slash', '/a'],
  ['trailing slash', 'a/'],
  ['double slash', 'a//b'],
  ['surrounding space', ' a'],
  ['not a string', 42],
];

/** Keys and options the contract refuses, naming the argument; Unicode keys and owners it accepts. */
export function describeArgumentValidation({ t, open, ttl }: LockSuite): void {
  t.describe('argument validation', () => {
    for (const [label, key] of INVALID_KEYS) {
      t.it(`refuses a key that is ${label}`, async () => {
        const p = await open();
        await rejectsWith(p.acquire(key as string), 'INVALID_ARGUMENT');
        await rejectsWith(p.tryAcquire(key as string), 'INVALID_ARGUMENT');
        await rejectsWith(p.inspect(key as string), 'INVALID_ARGUMENT');
      });
    }
    t.it('refuses bad options and says which one', async () => {
      const p = await open();
      const key = uniqueKey('options');
      const bad: Array<[string, object]> = [
        ['ttlMs', { ttlMs: -1 }],
        ['ttlMs', { ttlMs: Number.NaN }],
        ['waitMs', { waitMs: -5 }],
        ['waitMs', { waitMs: '10' }],
        ['signal', { signal: {} }],
        ['owner', { owner: 7 }],
        ['options', { ttl: 1000 }],
      ];
      for (const [argument, opts] of bad) {
        const error = await rejectsWith(p.acquire(key, opts as never), 'INVALID_ARGUMENT');
        assert.equal((error as Error & { argument?: string }).argument, argument, error.message);
      }
      assert.equal(await p.inspect(key), null, 'a refused acquire must leave nothing behind');
    });
    t.it('accepts Unicode keys and owner text', async () => {
      const p = await open();
      const key = `${uniqueKey('unicode')}/zählwerk-☃`;
      const lock = await p.acquire(key, { ...ttl, owner: 'host-ä/pid 1' });
      assert.equal((await p.inspect(key))?.holder?.owner, 'host-ä/pid 1');
      await lock.release();
    });
  });
}
