import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { type PartitionableEnsemble, startPartitionableEnsemble } from '../servers/zk-peer-links.js';

// A ZooKeeper follower answers reads from its own copy: one cut off from the leader keeps serving
// it, stale, for up to syncLimit × tickTime (here 10 × 1 s). leader() must not report a term that
// had already ended when it was called: a write through the leader (a quorum) comes first.
const TICK_MS = 1_000;

describe('zookeeper: leader() through a follower cut off from the leader', () => {
  let ensemble: PartitionableEnsemble;
  const providers: ZooKeeperLockProvider[] = [];
  const open = (node: number) => {
    const provider = new ZooKeeperLockProvider({
      connectString: ensemble.clientAddress(node),
      sessionTimeoutMs: 12_000,
      serverTickMs: TICK_MS,
      callTimeoutMs: 3_000,
    });
    providers.push(provider);
    return provider;
  };

  beforeAll(async () => {
    ensemble = await startPartitionableEnsemble(TICK_MS);
  }, 180_000);
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await ensemble?.stop();
  });

  it('does not report the term that ended on the ensemble before the call', async () => {
    const { leader: leaderNode, followers } = await ensemble.settled();
    const follower = followers[0] as number;
    const [a, b, observer] = [open(leaderNode), open(leaderNode), open(follower)];
    const termA = await a.election('stale-read').campaign('a');
    expect(await observer.election('stale-read').leader()).toEqual({ value: 'a', term: termA.term });

    ensemble.isolate(follower);
    try {
      await termA.resign(); // committed by the leader and the other follower
      const termB = await b.election('stale-read').campaign('b');
      expect(termB.term).toBeGreaterThan(termA.term);
      // The follower still has term A and answers reads; a write through the leader cannot pass the cut.
      const seen = await observer
        .election('stale-read')
        .leader()
        .then(
          (leader) => leader?.term,
          (error: { code?: string }) => error.code,
        );
      expect(seen).not.toBe(termA.term);
      expect([termB.term, 'BACKEND_UNAVAILABLE']).toContain(seen);
    } finally {
      ensemble.heal(follower);
    }
  }, 120_000);
});
