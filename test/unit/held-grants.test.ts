import { describe, expect, it } from 'vitest';
import { ProviderClosedError } from '../../src/errors.js';
import { HeldGrants } from '../../src/grant-loop.js';

/** A grant that counts its releases. */
const grant = () => {
  let released = 0;
  return {
    release: async () => {
      released += 1;
    },
    onRelease: () => undefined,
    released: () => released,
  };
};

const context = (closeSignal: AbortSignal, tracked: Promise<unknown>[]) => ({
  backend: 'memory',
  ttlMs: 1_000,
  waitMs: 1_000,
  callTimeoutMs: 1_000,
  closeSignal,
  track: (work: Promise<unknown>) => tracked.push(work),
});

describe('HeldGrants', () => {
  it('releases what it holds when the provider closes', async () => {
    const close = new AbortController();
    const tracked: Promise<unknown>[] = [];
    const held = new HeldGrants(context(close.signal, tracked));
    const g = grant();
    held.add(g);
    close.abort(new ProviderClosedError('memory'));
    await Promise.all(tracked);
    expect(g.released()).toBe(1);
  });

  it('a grant added after close() began is released and refused, not left to its lease', async () => {
    const close = new AbortController();
    const reason = new ProviderClosedError('memory');
    close.abort(reason);
    const tracked: Promise<unknown>[] = [];
    const held = new HeldGrants(context(close.signal, tracked));
    const g = grant();
    expect(() => held.add(g)).toThrow(reason);
    await Promise.all(tracked);
    expect(g.released()).toBe(1);
  });
});
