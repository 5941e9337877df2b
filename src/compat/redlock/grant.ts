import { LockTimeoutError } from '../../errors.js';
import { anyLockLost } from '../../signals.js';
import { longTimeout } from '../../timers.js';
import type { Lock as FencekitLock, LockProvider } from '../../types.js';
import type { LockGrant } from './lock.js';

/**
 * The fencekit locks behind one redlock Lock (and every Lock extended from it): one per distinct
 * resource, taken in sorted order so that two callers locking the same set in any order cannot
 * deadlock. It lasts until released or until its expiration passes unextended (then it releases
 * itself, as redlock's keys expire); `signal` aborts as soon as any of its locks is lost.
 */
export class Grant implements LockGrant {
  #signal: AbortSignal | undefined;
  #cancelExpiry: (() => void) | undefined;
  #released: Promise<void> | undefined;

  private constructor(readonly locks: ReadonlyMap<string, FencekitLock>) {}

  /**
   * Made on first read, as a fencekit lock makes its own: a signal that exists is aborted with a
   * LockLostError on release, a cost most grants (released unwatched) need not pay.
   * One lock (the usual case): its own signal, with no derived signal to create.
   */
  get signal(): AbortSignal {
    this.#signal ??= anyLockLost([...this.locks.values()]);
    return this.#signal;
  }

  /**
   * Takes every resource within waitMs in all, in sorted order; gives back what it took when one
   * fails, and rethrows that failure. A lock taken early can be lost while a later one is waited
   * for: such a set is never handed out; it is given back and taken again while time is left.
   */
  static async take(
    provider: LockProvider,
    resources: string[],
    ttlMs: number,
    waitMs: number,
  ): Promise<Grant> {
    const deadline = performance.now() + waitMs;
    const names = [...new Set(resources)].sort();
    for (;;) {
      const taken = new Map<string, FencekitLock>();
      const giveBack = () => Promise.allSettled([...taken.values()].map((lock) => lock.release()));
      try {
        for (const resource of names) {
          const left = Math.max(0, deadline - performance.now());
          taken.set(resource, await provider.acquire(resource, { ttlMs, waitMs: left }));
        }
      } catch (error) {
        await giveBack();
        throw error;
      }
      const lost = [...taken.values()].find((lock) => !lock.held);
      if (!lost) return new Grant(taken);
      await giveBack();
      if (performance.now() >= deadline) throw new LockTimeoutError(lost.key, waitMs);
    }
  }

  /** Whether every lock is still ours. */
  get held(): boolean {
    for (const lock of this.locks.values()) if (!lock.held) return false;
    return true;
  }

  /** Releases at `at` (ms since the epoch) unless moved or released before; undefined: never. */
  expireAt(at: number | undefined): void {
    this.#cancelExpiry?.();
    this.#cancelExpiry = undefined;
    if (at === undefined || this.#released) return;
    // longTimeout: a plain setTimeout fires after 1 ms for a delay past 2^31 ms (a long extend()).
    // Like a key's TTL in Redis, a pending expiry keeps no process alive.
    this.#cancelExpiry = longTimeout(
      () => this.release().catch(() => undefined), // the lease ends by itself; the provider retries the delete
      at - Date.now(),
      { unref: true },
    );
  }

  /**
   * Idempotent: gives back every lock (each release is guarded: never another holder's), and rejects
   * with the first failure once every release has settled.
   */
  release(): Promise<void> {
    this.#cancelExpiry?.();
    this.#released ??= Promise.allSettled([...this.locks.values()].map((lock) => lock.release())).then(
      (outcomes) => {
        for (const outcome of outcomes) if (outcome.status === 'rejected') throw outcome.reason;
      },
    );
    return this.#released;
  }

  get released(): boolean {
    return this.#released !== undefined;
  }
}
