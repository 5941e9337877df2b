import { describe, expect, it } from 'vitest';
import {
  FencedStore,
  FencekitError,
  InvalidArgumentError,
  type LockLostError,
  MemoryLockProvider,
  StaleFencingTokenError,
} from '../../src/index.js';
import { validateKey } from '../../src/provider-kit.js';
import { MemoryLockServer } from '../../src/testing/index.js';

describe('validateKey', () => {
  it('accepts nested names and Unicode', () => {
    for (const key of ['a', 'a/b', 'orders/42', 'zählwerk', 'a.b', '..a', 'a..'])
      expect(validateKey(key)).toBe(key);
  });
  it('says what is wrong', () => {
    expect(() => validateKey('a/../b')).toThrow(/"\.\." path segment/);
    expect(() => validateKey('x'.repeat(513))).toThrow(/513 bytes/);
    expect(() => validateKey('é'.repeat(257))).toThrow(/514 bytes/);
  });
});

describe('errors', () => {
  it('carry stable codes and stay instanceof across the hierarchy', () => {
    const error = new InvalidArgumentError('ttlMs', 'too small');
    expect(error).toBeInstanceOf(FencekitError);
    expect(error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      name: 'InvalidArgumentError',
      argument: 'ttlMs',
    });
    expect(error.message).toBe('invalid ttlMs: too small');
  });
});

describe('FencedStore', () => {
  it('accepts rising and equal tokens, rejects lower ones with StaleFencingTokenError', () => {
    const store = new FencedStore<string>();
    store.write('card', 'charge-1', 5n);
    store.write('card', 'charge-1-retry', 5n);
    store.write('card', 'charge-2', 7n);
    expect(() => store.write('card', 'stale', 6n)).toThrow(StaleFencingTokenError);
    expect(store.tryWrite('card', 'stale', 1n)).toBe(false);
    expect(store.read('card')).toBe('charge-2');
    expect(store.highestToken('card')).toBe(7n);
    store.write('other', 'independent', 1n);
    expect(() => store.write('card', 'x', 2n)).toThrow(
      expect.objectContaining({ code: 'STALE_FENCING_TOKEN', token: 2n, highestAccepted: 7n }),
    );
  });
  it('refuses a token that is not a bigint', () => {
    expect(() => new FencedStore().write('r', 1, 3 as unknown as bigint)).toThrow(InvalidArgumentError);
  });
});

describe('await using', () => {
  it('releases at the end of the block, also when it throws', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    let escaped: { held: boolean; signal: AbortSignal } | undefined;
    await expect(
      (async () => {
        await using lock = await provider.acquire('job');
        escaped = lock;
        throw new Error('boom');
      })(),
    ).rejects.toThrow('boom');
    expect(escaped?.held).toBe(false);
    expect((escaped?.signal.reason as LockLostError | undefined)?.reason).toBe('released');
    expect(await provider.inspect('job')).toBeNull();
    await provider.close();
  });
});
