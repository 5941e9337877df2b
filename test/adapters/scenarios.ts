import assert from 'node:assert/strict';
import { expect } from 'vitest';
import type { Lock, LockProvider } from '../../src/index.js';
import { ExclusionMonitor, eventually } from '../../src/testing/index.js';

/**
 * A lock-delay waited out: the waiting acquire is granted no sooner than `delayMs` after `lostAt`,
 * the moment its holder was lost (the delay counts from after the loss). Releases the lock.
 */
export async function expectGrantedAfterDelay(waiting: Promise<Lock>, lostAt: number, delayMs: number) {
  const lock = await waiting;
  const waited = performance.now() - lostAt;
  await lock.release();
  expect(waited, 'the delay counts from after the deletion').toBeGreaterThanOrEqual(delayMs);
}

/** A provider that counts the wake-ups of its waiters (etcd, ZooKeeper, Redis). */
type CountingWakeups = LockProvider & { readonly wakeups: number };

/**
 * The herd check at scale: every waiter queues behind the holder, then each release must grant the
 * next one and wake at most one (the wake-up count rises by at most one per release, and by about
 * one: a waiter that finds its predecessor gone as it sets its watch needs none). Releases them all.
 */
export async function expectOneWakeupPerRelease(
  holder: LockProvider,
  waiters: CountingWakeups[],
  key: string,
): Promise<void> {
  const first = await holder.acquire(key);
  const granted: Lock[] = [];
  const pending = waiters.map((w) => w.acquire(key, { waitMs: 60_000 }).then((l) => granted.push(l)));
  // Awaited at the end; if an assertion fails first, the waits end with the closed providers and
  // must not pile unhandled rejections on top of that failure.
  for (const wait of pending) wait.catch(() => undefined);
  const count = waiters.length;
  await eventually(
    `${count} waiters queued`,
    async () => (await holder.inspect(key))?.waiters === count,
    20_000,
  );
  const wakeups = () => waiters.reduce((sum, w) => sum + w.wakeups, 0);
  const before = wakeups();
  await first.release();
  for (let i = 1; i <= count; i++) {
    await eventually(`grant ${i}`, async () => granted.length === i, 10_000);
    // No herd: at most one wake-up per release. One fewer is no herd either: a waiter whose
    // predecessor went before its watch was set finds it gone and needs no wake-up.
    expect(wakeups() - before, `after ${i} releases`).toBeLessThanOrEqual(i);
    if (i < count) await (granted[i - 1] as Lock).release();
  }
  // … and the waits did run on watches (a grant without any would be polling).
  expect(wakeups() - before).toBeGreaterThanOrEqual(count / 2);
  await (granted[count - 1] as Lock).release();
  await Promise.all(pending);
}

/**
 * Clients contend for key with 5 ms holds for 8 s; after 1.5 s `killLeader` runs. Every grant goes
 * through the monitor (overlapping grants or falling tokens throw there). Failed attempts
 * (unavailable or timed out while the cluster elects) are recorded and retried. Closes the clients.
 */
export async function contendThroughLeaderKill(
  clients: LockProvider[],
  key: string,
  killLeader: () => Promise<void>,
): Promise<{ monitor: ExclusionMonitor; failuresAt: number[]; killedAt: number }> {
  const monitor = new ExclusionMonitor();
  const deadline = performance.now() + 8_000;
  const failuresAt: number[] = [];
  const contend = async (client: LockProvider) => {
    while (performance.now() < deadline) {
      try {
        await client.withLock(
          key,
          async (lock) => {
            monitor.enter(lock);
            await new Promise((r) => setTimeout(r, 5));
            monitor.exit(lock);
          },
          { waitMs: 3_000 },
        );
      } catch (error) {
        // Only backend trouble is retried: an overlap or a falling token fails the test.
        if (error instanceof assert.AssertionError) throw error;
        failuresAt.push(performance.now());
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  const running = clients.map(contend);
  await new Promise((r) => setTimeout(r, 1_500));
  await killLeader();
  const killedAt = performance.now();
  await Promise.all(running);
  await Promise.allSettled(clients.map((c) => c.close()));
  return { monitor, failuresAt, killedAt };
}
