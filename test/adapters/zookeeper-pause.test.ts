import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  queueOrder,
  ZooKeeperLockProvider,
  type ZooKeeperProviderOptions,
} from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { uniqueKey } from '../../src/testing/index.js';
import type { Lock } from '../../src/types.js';
import { type PartitionableEnsemble, startPartitionableEnsemble } from '../servers/zk-peer-links.js';
import { ENSEMBLE_DEADLINE_MS } from '../servers/zk-quorum.js';
import { ObservedProvider } from './zookeeper-observed.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A SIGSTOP of the server a holder is connected to, longer than the read timeout but shorter than
 * the session, started right after an answered heartbeat: the holder knows the other two members,
 * so it can move its session to one of them in time, as the Java client does. The lock is kept
 * (same node, same session, signal live) and nobody else is granted meanwhile. When the holder
 * knows only that server, nothing can confirm the session: it is lost, and the holder must be told
 * before the leader can expire the session and grant another client, which a heartbeat's own touch
 * does not delay (docs/zookeeper.md).
 */
describe('ZooKeeper: a pause of the holder’s server (3 nodes, tickTime 200)', () => {
  let ensemble: PartitionableEnsemble;
  const providers: ZooKeeperLockProvider[] = [];
  beforeAll(async () => {
    ensemble = await startPartitionableEnsemble(200);
  }, 180_000);
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await ensemble?.stop();
  });

  async function pauseHolderServer(options: Partial<ZooKeeperProviderOptions>, pauseMs: number) {
    const everyone = [0, 1, 2].map((n) => ensemble.clientAddress(n)).join(',');
    const key = uniqueKey('pause');
    // A pause of the leader stops every write until a new one is elected: this case is a follower's.
    // The client picks a server at random; a holder that lands on the leader starts again.
    let holderSide: ObservedProvider | undefined;
    let lock: Lock | undefined;
    let holderServer = -1;
    for (let attempt = 0; attempt < 10 && !lock; attempt++) {
      // One leader, two followers, each serving writes: a previous case's pause may have sent the
      // paused node through an election, which takes its time on a loaded machine.
      const { followers } = await ensemble.settled();
      const before = await Promise.all([0, 1, 2].map((n) => ensemble.connections(n)));
      holderSide = new ObservedProvider({ connectString: everyone, sessionTimeoutMs: 4_000, ...options });
      providers.push(holderSide);
      const granted = await holderSide.acquire(key);
      const after = await Promise.all([0, 1, 2].map((n) => ensemble.connections(n)));
      holderServer = after.findIndex((count, n) => count > (before[n] as number));
      if (followers.includes(holderServer)) lock = granted;
      else await holderSide.close();
    }
    if (!lock || !holderSide) throw new Error('the holder did not land on a follower in 10 tries');
    const otherServer = (holderServer + 1) % 3;
    const otherSide = new ZooKeeperLockProvider({
      connectString: ensemble.clientAddress(otherServer),
      sessionTimeoutMs: 4_000,
      serverTickMs: 200,
    });
    providers.push(otherSide);
    // The node that holds, and its session, seen by a client of its own.
    const observer = await ZkClient.connect(
      { connectString: ensemble.clientAddress(otherServer), sessionTimeoutMs: 4_000, callTimeoutMs: 5_000 },
      { timeoutMs: ENSEMBLE_DEADLINE_MS }, // the ensemble serves: this is a bound, not a wait
    );
    const head = async () => {
      const folder = holderSide.folder(key);
      const node = queueOrder(await observer.getChildren(folder), 'lock-')[0]?.name;
      const stat = node ? await observer.exists(`${folder}/${node}`) : null;
      return { node, owner: stat?.ephemeralOwner };
    };
    const holding = await head();
    let grantedWhileHeld = false;
    let released = false;
    const waiting = otherSide.acquire(key, { waitMs: 60_000 }).then((next) => {
      if (!lock?.signal.aborted && !released) grantedWhileHeld = true;
      return next;
    });
    try {
      await holderSide.nextHeartbeat();
      ensemble.pause(holderServer);
      console.error(
        `${Math.round(performance.now())} paused ${holderServer} modes ${await Promise.all([0, 1, 2].map((n) => ensemble.mode(n)))}`,
      );
      await sleep(pauseMs);
      ensemble.resume(holderServer);
      await sleep(1_000); // the resumed server catches up; a lost session would show by now
      const outcome = {
        signalAborted: lock.signal.aborted,
        abortReason: lock.signal.aborted ? String(lock.signal.reason) : undefined,
        held: lock.held,
        head: await head(),
        grantedWhileHeld,
      };
      expect(outcome).toEqual({
        signalAborted: false,
        abortReason: undefined,
        held: true,
        head: holding,
        grantedWhileHeld: false,
      });
    } finally {
      ensemble.resume(holderServer);
      released = true;
      await lock.release().catch(() => undefined); // the assertion above says whether it was held
      await (await waiting).release();
      await observer.close();
    }
  }

  it('provider defaults (serverTickMs 2000 on a tick-200 ensemble): the lock is kept', async () => {
    await pauseHolderServer({}, 3_200);
  }, 120_000);

  it('the failure model’s settings (docs/failure-model.md) (serverTickMs 200, callTimeoutMs 1000): the lock is kept', async () => {
    await pauseHolderServer({ serverTickMs: 200, callTimeoutMs: 1_000 }, 3_200);
  }, 120_000);

  it('the holder’s only server paused right after a heartbeat: nobody is granted before the holder is told', async () => {
    // After the previous cases' pauses: wait until both followers serve again, whatever that takes.
    const { followers } = await ensemble.settled();
    const [holderServer, otherServer] = followers as [number, number];
    const open = (node: number) => {
      const provider = new ObservedProvider({
        connectString: ensemble.clientAddress(node),
        sessionTimeoutMs: 4_000,
        serverTickMs: 200,
        callTimeoutMs: 1_000,
      });
      providers.push(provider);
      return provider;
    };
    const holderSide = open(holderServer);
    const otherSide = open(otherServer);
    const key = uniqueKey('pause-only');
    const lock = await holderSide.acquire(key);
    await (await otherSide.acquire(uniqueKey('warm-up'))).release(); // its session is open before the fault
    let abortedAt: number | undefined;
    lock.signal.addEventListener('abort', () => {
      abortedAt = performance.now();
    });
    let grantedAt: number | undefined;
    const waiting = otherSide.acquire(key, { waitMs: 60_000 }).then((next) => {
      grantedAt = performance.now();
      return next;
    });
    try {
      // The follower forwards this heartbeat to the leader and stops before its next report of
      // touches: the leader counts the session from an older touch.
      await holderSide.nextHeartbeat();
      ensemble.pause(holderServer);
      await waiting;
      expect({
        told: abortedAt !== undefined,
        toldFirst: (abortedAt ?? Infinity) < (grantedAt as number),
      }).toEqual({
        told: true,
        toldFirst: true,
      });
    } finally {
      ensemble.resume(holderServer);
      await (await waiting).release();
    }
  }, 120_000);
});
