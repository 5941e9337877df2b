import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { type PartitionableEnsemble, startPartitionableEnsemble } from '../servers/zk-peer-links.js';

/** Milliseconds from `since` until `signal` aborts, or undefined if it did not within `limitMs`. */
function abortTime(signal: AbortSignal, since: number, limitMs: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(performance.now() - since);
    const timer = setTimeout(() => resolve(undefined), limitMs);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve(performance.now() - since);
    });
  });
}

describe('ZooKeeper safety on a 3-node ensemble (tickTime 200, syncLimit 10)', () => {
  let ensemble: PartitionableEnsemble;
  const providers: ZooKeeperLockProvider[] = [];
  beforeAll(async () => {
    ensemble = await startPartitionableEnsemble(200);
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await ensemble?.stop();
  });

  it('a holder on a follower cut off from its peers loses its signal before anyone else is granted', async () => {
    const modes = await Promise.all([0, 1, 2].map((n) => ensemble.mode(n)));
    const follower = modes.indexOf('follower');
    const other = [0, 1, 2].find((n) => n !== follower) as number;
    expect(follower).toBeGreaterThanOrEqual(0);
    const open = (node: number) => {
      const provider = new ZooKeeperLockProvider({
        connectString: ensemble.clientAddress(node),
        sessionTimeoutMs: 4_000,
        serverTickMs: 200,
      });
      providers.push(provider);
      return provider;
    };
    const holderSide = open(follower);
    const otherSide = open(other);
    const key = uniqueKey('isolated-follower');
    const held = await holderSide.acquire(key);
    await new Promise((r) => setTimeout(r, 1_500)); // heartbeats in their steady rhythm

    const cutAt = performance.now();
    ensemble.isolate(follower);
    const aborted = abortTime(held.signal, cutAt, 15_000);
    const granted = otherSide.acquire(key, { waitMs: 15_000 }).then((lock) => ({
      lock,
      at: performance.now() - cutAt,
    }));
    const [abortedAt, grant] = await Promise.all([aborted, granted]);
    ensemble.heal(follower);
    console.log(
      `holder's signal aborted at ${abortedAt?.toFixed(0)} ms, other granted at ${grant.at.toFixed(0)} ms after the cut`,
    );
    expect(abortedAt).toBeDefined();
    expect(abortedAt as number).toBeLessThan(grant.at);
    await grant.lock.release();
  }, 60_000);
});
