import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type Lock, MemoryLockProvider } from '../../src/index.js';
import { MemoryLockServer } from '../../src/testing/index.js';

// Random interleavings of acquire / release / expiry / abort on one key, with virtual time so that
// leases really expire in the run. Invariants: no two grants with un-aborted signals at once, and
// tokens rise strictly in grant order.

type Op =
  | { kind: 'acquire'; client: number; waitMs: number }
  | { kind: 'try'; client: number }
  | { kind: 'release'; pick: number }
  | { kind: 'abort'; pick: number }
  | { kind: 'partition'; client: number; cut: boolean }
  | { kind: 'advance'; ms: number };

const CLIENTS = 3;
const TTL_MS = 300;

// Weighted towards the steps that make leases change hands: waits, virtual time and partitions.
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('acquire' as const),
      client: fc.nat(CLIENTS - 1),
      waitMs: fc.constantFrom(0, 50, 500, Number.POSITIVE_INFINITY),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('try' as const), client: fc.nat(CLIENTS - 1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort' as const), pick: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('partition' as const),
      client: fc.nat(CLIENTS - 1),
      cut: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 700 }) }),
  },
);

async function run(ops: Op[]): Promise<void> {
  const server = new MemoryLockServer();
  const clients = Array.from({ length: CLIENTS }, () => new MemoryLockProvider({ server, ttlMs: TTL_MS }));
  const granted: Lock[] = [];
  const pending: AbortController[] = [];
  const violations: string[] = [];
  let waiting = 0;
  let lastToken = 0n;
  const settle = () => vi.advanceTimersByTimeAsync(0);

  // Runs inside promise callbacks: record, and fail the step that follows.
  const onGrant = (lock: Lock) => {
    const live = granted.filter((other) => !other.signal.aborted);
    if (live.length > 0)
      violations.push(`token ${lock.fencingToken} granted while ${live[0]?.fencingToken} live`);
    if (lock.fencingToken <= lastToken) violations.push(`token ${lock.fencingToken} after ${lastToken}`);
    lastToken = lock.fencingToken;
    granted.push(lock);
  };
  const key = 'order/42';

  for (const step of ops) {
    switch (step.kind) {
      case 'acquire': {
        const controller = new AbortController();
        pending.push(controller);
        waiting += 1;
        (clients[step.client] as MemoryLockProvider)
          .acquire(key, { waitMs: step.waitMs, signal: controller.signal })
          .then(onGrant, (error: { code?: string }) => {
            if (!['LOCK_TIMEOUT', 'ABORTED', 'BACKEND_UNAVAILABLE'].includes(error.code ?? '')) {
              violations.push(`unexpected ${error.code}`);
            }
          })
          .finally(() => {
            waiting -= 1;
          });
        break;
      }
      case 'try': {
        const lock = await (clients[step.client] as MemoryLockProvider).tryAcquire(key).catch(() => null);
        if (lock) onGrant(lock);
        break;
      }
      case 'release': {
        const lock = granted[step.pick % Math.max(granted.length, 1)];
        await lock?.release().catch(() => undefined);
        break;
      }
      case 'abort':
        pending[step.pick % Math.max(pending.length, 1)]?.abort();
        break;
      case 'partition':
        (clients[step.client] as MemoryLockProvider).simulate.partition(step.cut);
        break;
      case 'advance':
        await vi.advanceTimersByTimeAsync(step.ms);
        break;
    }
    await settle();
    expect(violations).toEqual([]);
    expect(granted.filter((l) => !l.signal.aborted).length).toBeLessThanOrEqual(1);
    // Every queue entry belongs to an acquire still waiting: a cancelled one left nothing behind.
    // (A waiting acquire of a partitioned client retries within its waitMs and is not queued.)
    expect(server.inspect(key)?.waiters ?? 0).toBeLessThanOrEqual(waiting);
  }
  for (const client of clients) client.simulate.partition(false);
  await Promise.all(clients.map((c) => c.close()));
  await vi.advanceTimersByTimeAsync(10 * TTL_MS);
  expect(server.inspect(key)).toBeNull();
}

describe('memory provider properties', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('never two live grants, tokens strictly rising, nothing left after close', async () => {
    await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 60 }), run), { numRuns: 300 });
  });
});
