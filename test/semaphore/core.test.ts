import { describe, expect, it } from 'vitest';
import { BackendUnavailableError } from '../../src/index.js';
import { GenericSemaphore, OwnedLock, type SemaphoreAdapter } from '../../src/provider-kit.js';

/** The generic part alone, over a scripted adapter: what every backend gets from src/semaphore. */
function scripted(answers: Array<() => OwnedLock | null | Error>): { adapter: SemaphoreAdapter } {
  const adapter: SemaphoreAdapter = {
    async request(_req, cancel) {
      const next = answers.shift();
      // Nothing more to grant: waits in the queue until cancelled, as the contract says.
      if (!next)
        return new Promise((_, reject) => cancel.addEventListener('abort', () => reject(cancel.reason)));
      const answer = next();
      if (answer instanceof Error) throw answer;
      return answer;
    },
    async inspect() {
      return { holders: [], waiters: 0 };
    },
  };
  return { adapter };
}

function lock(token: bigint, released: bigint[], lost = false): OwnedLock {
  const owned = new OwnedLock({
    key: 'jobs',
    fencingToken: token,
    ownerToken: `grant-${token}`,
    releaseOnBackend: async () => void released.push(token),
  });
  if (lost) owned.lose('unconfirmed');
  return owned;
}

const context = () => ({
  backend: 'test',
  ttlMs: 1_000,
  waitMs: 2_000,
  callTimeoutMs: 200,
  closeSignal: new AbortController().signal,
});

describe('GenericSemaphore', () => {
  it('never hands out a permit born lost: releases it and keeps waiting', async () => {
    const released: bigint[] = [];
    const { adapter } = scripted([() => lock(1n, released, true), () => lock(2n, released)]);
    const s = new GenericSemaphore('jobs', { limit: 2 }, context(), adapter);
    const permit = await s.acquire();
    expect({ token: permit.fencingToken, held: permit.held, aborted: permit.signal.aborted }).toEqual({
      token: 2n,
      held: true,
      aborted: false,
    });
    expect(released).toEqual([1n]);
  });

  it('tryAcquire answers null rather than a lost permit', async () => {
    const released: bigint[] = [];
    const { adapter } = scripted([() => lock(1n, released, true)]);
    const s = new GenericSemaphore('jobs', { limit: 2 }, context(), adapter);
    expect(await s.tryAcquire()).toBeNull();
    expect(released).toEqual([1n]);
  });

  it('rides through an outage once the backend was reached, within waitMs', async () => {
    const released: bigint[] = [];
    const down = () => new BackendUnavailableError('down');
    const { adapter } = scripted([() => lock(1n, released), down, down, () => lock(2n, released)]);
    const s = new GenericSemaphore('jobs', { limit: 2 }, context(), adapter);
    await (await s.acquire()).release();
    const permit = await s.acquire({ waitMs: 5_000 });
    expect(permit.fencingToken).toBe(2n);
  });

  it('a wait that runs out during an outage says the backend is unavailable', async () => {
    const released: bigint[] = [];
    const down = () => new BackendUnavailableError('down');
    const { adapter } = scripted([() => lock(1n, released), ...Array.from({ length: 100 }, () => down)]);
    const s = new GenericSemaphore('jobs', { limit: 2 }, context(), adapter);
    await (await s.acquire()).release();
    await expect(s.acquire({ waitMs: 300 })).rejects.toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
  });

  it('the provider closing fails waiters and releases held permits', async () => {
    const released: bigint[] = [];
    const { adapter } = scripted([() => lock(1n, released)]);
    const closing = new AbortController();
    const s = new GenericSemaphore(
      'jobs',
      { limit: 2 },
      { ...context(), closeSignal: closing.signal },
      adapter,
    );
    const permit = await s.acquire();
    const waiting = s.acquire();
    const refused = expect(waiting).rejects.toThrow('closed');
    closing.abort(new Error('closed'));
    await refused;
    expect(permit.held).toBe(false);
    expect(released).toEqual([1n]);
  });
});
