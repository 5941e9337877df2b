import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Lock, type LockLostError, MemoryLockProvider, type ReadWriteLock } from '../../src/index.js';
import { MemoryLockServer } from '../../src/memory/server.js';

// A downgrade hands out a read at once, without a backend call: it must meet the rule of every
// grant, no grant handed out already lost, or about to be (the acquire loop's hand-out margin).
/**
 * Runs `check` (in fake time) with a write of a 1 s TTL, its client cut off from the memory server
 * since the grant so that no renewal lands, 950 ms later: held, with about 40 ms of trust left.
 */
async function withWriteRunningOut(check: (rw: ReadWriteLock, write: Lock) => Promise<void>): Promise<void> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
  const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
  try {
    const rw = provider.readWriteLock('config/routes');
    const write = await rw.acquireWrite({ ttlMs: 1_000 }); // hand-out margin 100 ms
    provider.simulate.partition(true); // its renewals fail from now on: trust ends at about 990 ms
    await vi.advanceTimersByTimeAsync(950);
    await check(rw, write);
  } finally {
    provider.simulate.partition(false);
    const closing = provider.close();
    await vi.advanceTimersByTimeAsync(5_000);
    await closing;
  }
}

describe('read-write downgrade of a write whose lease is running out', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is refused with the write’s loss (unconfirmed), not handed out with 40 ms of trust left', async () => {
    await withWriteRunningOut(async (rw, write) => {
      expect(write.held).toBe(true); // still held, for less than the hand-out margin
      const error = await rw.acquireRead({ downgradeFrom: write }).then(
        () => undefined,
        (e: unknown) => e as LockLostError,
      );
      expect({ code: error?.code, reason: error?.reason }).toEqual({
        code: 'LOCK_LOST',
        reason: 'unconfirmed',
      });
      expect(write.held).toBe(true); // refused, not released: the write is still the caller's
      await vi.advanceTimersByTimeAsync(100);
      expect(write.held).toBe(false);
      // A lost write is refused with its own loss, the error its signal carries.
      const later = await rw.acquireRead({ downgradeFrom: write }).catch((e: unknown) => e as LockLostError);
      expect(later).toBe(write.signal.reason);
      // Lost, then released: still its loss (only a write released while held is INVALID_ARGUMENT).
      await write.release().catch(() => undefined);
      const afterRelease = await rw.acquireRead({ downgradeFrom: write }).catch((e: unknown) => e);
      expect((afterRelease as LockLostError).code).toBe('LOCK_LOST');
    });
  });

  it('the margin is the write’s (by its TTL), not the read request’s', async () => {
    await withWriteRunningOut(async (rw, write) => {
      // A read asking for a 50 ms TTL (margin 5 ms) does not lower the write's margin.
      await expect(rw.acquireRead({ downgradeFrom: write, ttlMs: 50 })).rejects.toMatchObject({
        code: 'LOCK_LOST',
        reason: 'unconfirmed',
      });
    });
  });

  it('a released write is an InvalidArgumentError (nothing to continue)', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    try {
      const rw = provider.readWriteLock('config/routes');
      const write = await rw.acquireWrite({ ttlMs: 1_000 });
      await write.release();
      await expect(rw.acquireRead({ downgradeFrom: write })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        argument: 'downgradeFrom',
      });
    } finally {
      await provider.close();
    }
  });
});
