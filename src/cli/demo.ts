import { setTimeout as sleep } from 'node:timers/promises';
import { StaleFencingTokenError } from '../errors.js';
import { FencedStore } from '../fencing/fenced-store.js';
import { MemoryLockProvider } from '../memory/provider.js';
import type { Lock, LockProvider } from '../types.js';

/**
 * The story fencekit exists for: worker A holds the lock for order 42, pauses (GC, swap, SIGSTOP)
 * longer than its lease, B takes the lock and charges the card, A wakes up and charges again.
 * Without fencing the card is charged twice; with fencing the payment store rejects A's stale token.
 */

export interface DemoOptions {
  /** Two clients of the same backend: one per worker, as two processes would have. */
  workerA: LockProvider;
  workerB: LockProvider;
  /** Stops A's lease renewals for ms, as a stop-the-world pause would. */
  pause: (provider: LockProvider, ms: number) => Promise<void>;
  fencing: boolean;
  ttlMs: number;
  print: (line: string) => void;
}

export interface DemoResult {
  charges: number;
  rejected: number;
  tokens: { a: bigint; b: bigint };
}

/** A payment API: with fencing it remembers the highest token per order and refuses lower ones. */
class PaymentGateway {
  readonly charges: string[] = [];
  readonly #fence = new FencedStore<string>();
  constructor(readonly fencing: boolean) {}

  charge(order: string, by: string, token: bigint): void {
    if (this.fencing) this.#fence.write(order, by, token);
    this.charges.push(`${order} by ${by}`);
  }
}

export async function runPaymentStory(opts: DemoOptions): Promise<DemoResult> {
  const { workerA, workerB, ttlMs, print } = opts;
  const key = 'orders/42';
  const gateway = new PaymentGateway(opts.fencing);
  const started = performance.now();
  const say = (who: string, text: string) =>
    print(`  t=${String(Math.round(performance.now() - started)).padStart(5)} ms  ${who}  ${text}`);
  let rejected = 0;

  const a = await workerA.acquire(key, { ttlMs, owner: 'worker-A' });
  say('A', `acquired "${key}" with fencing token ${a.fencingToken} (lease ${ttlMs} ms)`);
  a.signal.addEventListener('abort', () =>
    say(
      'A',
      `signal aborted (${(a.signal.reason as Error).message.split(': ').at(-1)}); A is paused and cannot see it`,
    ),
  );

  // B starts waiting while A holds the lock.
  const bDone = (async (): Promise<Lock> => {
    await sleep(ttlMs / 10);
    say('B', `waits for "${key}"`);
    const b = await workerB.acquire(key, { ttlMs, owner: 'worker-B', waitMs: ttlMs * 10 });
    say('B', `acquired "${key}" with fencing token ${b.fencingToken}`);
    gateway.charge('order 42', 'B', b.fencingToken);
    say('B', `charged the card for order 42 (charges so far: ${gateway.charges.length})`);
    await b.release();
    say('B', 'released the lock');
    return b;
  })();

  say('A', `checks its lock: held=${a.held}; about to charge the card`);
  const pauseMs = Math.round(ttlMs * 2.5);
  say('A', `pauses for ${pauseMs} ms (stop-the-world GC): no lease renewals go out`);
  await opts.pause(workerA, pauseMs);
  say('A', 'resumes and charges the card, still believing it holds the lock');
  try {
    gateway.charge('order 42', 'A', a.fencingToken);
    say('A', `charged the card for order 42 (charges so far: ${gateway.charges.length})  <-- DOUBLE CHARGE`);
  } catch (error) {
    if (!(error instanceof StaleFencingTokenError)) throw error;
    rejected += 1;
    say('A', `charge REJECTED by the payment store: ${error.message}`);
  }
  const b = await bDone;
  await a.release().catch(() => undefined);
  return { charges: gateway.charges.length, rejected, tokens: { a: a.fencingToken, b: b.fencingToken } };
}

/** A pause for the memory backend: A's client is cut off from the server while it sleeps. */
export async function pauseMemoryClient(provider: LockProvider, ms: number): Promise<void> {
  if (!(provider instanceof MemoryLockProvider)) {
    throw new Error('the in-process pause needs the memory provider');
  }
  provider.simulate.partition(true);
  await sleep(ms);
  provider.simulate.partition(false);
}

export const RUN_TITLES = {
  unfenced: 'Run 1: WITHOUT fencing: the payment API trusts whoever calls it',
  fenced: 'Run 2: WITH fencing: the payment store rejects a fencing token lower than the highest it has seen',
};

export async function runDemo(
  openClient: () => Promise<LockProvider>,
  pause: DemoOptions['pause'],
  print: (line: string) => void,
  ttlMs = 1_000,
): Promise<DemoResult[]> {
  const results: DemoResult[] = [];
  for (const fencing of [false, true]) {
    print('');
    print(fencing ? RUN_TITLES.fenced : RUN_TITLES.unfenced);
    const [workerA, workerB] = [await openClient(), await openClient()];
    try {
      const result = await runPaymentStory({ workerA, workerB, pause, fencing, ttlMs, print });
      print(
        `  => ${result.charges} charge${result.charges === 1 ? '' : 's'}` +
          (fencing ? `, ${result.rejected} stale write rejected` : ''),
      );
      results.push(result);
    } finally {
      await Promise.all([workerA.close(), workerB.close()]);
    }
  }
  return results;
}
