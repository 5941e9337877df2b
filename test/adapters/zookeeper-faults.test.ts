import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { runAsLeader } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, type ServerMember, startServers } from '../servers/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ROUNDS = Number(process.env.FENCEKIT_ZK_FAULT_ROUNDS ?? 3);
const SESSION_MS = 2_000;
/** Pause length: 1.5 s past the session timeout in CI; FENCEKIT_ZK_PAUSE_MS=8000 reproduces issue 13. */
const PAUSE_MS = Number(process.env.FENCEKIT_ZK_PAUSE_MS ?? SESSION_MS + 1_500);

/** Two replicas running for leadership and two contending for a lock, on one connect string. */
function workload(connectString: string) {
  const stop = new AbortController();
  const providers = Array.from(
    { length: 4 },
    () => new ZooKeeperLockProvider({ connectString, sessionTimeoutMs: SESSION_MS, callTimeoutMs: 1_000 }),
  );
  const terms: bigint[] = [];
  const lockTokens: bigint[] = [];
  const election = uniqueKey('pause-election');
  const lockKey = uniqueKey('pause-lock');
  const runs = providers.slice(0, 2).map((provider, i) =>
    runAsLeader(
      provider,
      election,
      async ({ signal, term }) => {
        terms.push(term);
        await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      },
      { value: `replica-${i}`, signal: stop.signal, backoff: { initialMs: 20, maxMs: 200 } },
    ).catch(() => undefined),
  );
  const lockers = providers.slice(2).map(async (provider) => {
    while (!stop.signal.aborted) {
      try {
        const lock = await provider.acquire(lockKey, { waitMs: 1_000, signal: stop.signal });
        lockTokens.push(lock.fencingToken);
        await sleep(20);
        await lock.release();
      } catch {
        await sleep(50);
      }
    }
  });
  return {
    terms,
    lockTokens,
    async stop() {
      stop.abort();
      await Promise.all([...runs, ...lockers]);
      await Promise.all(providers.map((p) => p.close()));
    },
  };
}

/** Rounds of a fault on one member while the workload runs: after each, leadership and locks come back. */
async function faultRounds(connectString: string, fault: () => Promise<void>) {
  const load = workload(connectString);
  try {
    await eventually(
      'a first leader and a first lock',
      async () => load.terms.length > 0 && load.lockTokens.length > 0,
    );
    for (let round = 0; round < ROUNDS; round++) {
      await fault();
      const [terms, locks] = [load.terms.length, load.lockTokens.length];
      await eventually(
        `round ${round}: a new term and new locks after the fault`,
        async () => load.terms.length > terms && load.lockTokens.length > locks + 2,
        15_000,
      );
    }
    for (let i = 1; i < load.terms.length; i++)
      expect(load.terms[i]).toBeGreaterThan(load.terms[i - 1] as bigint);
  } finally {
    await load.stop();
  }
}

const pause = (member: ServerMember) => async () => {
  await member.pause();
  await sleep(PAUSE_MS);
  await member.resume();
};

describe('ZooKeeper standalone server faults with elections and locks running', () => {
  let zk: ServerGroup;
  beforeAll(async () => {
    zk = await startServers('zookeeper', { faults: true });
  });
  afterAll(() => zk?.stop());

  it('SIGSTOP past the session timeout, then SIGCONT: the process survives, leadership and locks come back', async () => {
    await faultRounds(endpoint(zk, 'ZK_CONNECT'), pause(zk.members[0] as ServerMember));
  }, 90_000);
});
