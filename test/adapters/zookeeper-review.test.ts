import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Findings of the adversarial review on ZooKeeper, each on a real (private, pausable) server. */
describe('ZooKeeper review findings', () => {
  let zk: ServerGroup;
  let connectString: string;
  const providers: ZooKeeperLockProvider[] = [];
  const open = () => {
    const provider = new ZooKeeperLockProvider({ connectString, sessionTimeoutMs: 4_000, serverTickMs: 200 });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    zk = await startServers('zookeeper', { faults: true });
    connectString = endpoint(zk, 'ZK_CONNECT');
  });
  afterAll(async () => {
    await zk?.members[0]?.resume();
    await Promise.allSettled(providers.map((p) => p.close()));
    await zk?.stop();
  });

  /** A provider whose session is open. */
  const whileUp = async () => {
    const p = open();
    await (await p.acquire(uniqueKey('warm-up'))).release();
    return p;
  };

  /** With the server frozen (SIGSTOP) just after a warm-up, how long `attempt` takes to reject. */
  const whileFrozen = async (attempt: (p: ZooKeeperLockProvider) => Promise<unknown>) => {
    const p = open();
    await (await p.acquire(uniqueKey('warm-up'))).release(); // connected, session open
    const member = zk.members[0];
    if (!member) throw new Error('needs a private ZooKeeper');
    await member.pause();
    try {
      const started = performance.now();
      const outcome = await attempt(p).then(
        () => 'granted',
        (error: Error & { code?: string }) => error.code ?? error.name,
      );
      return { outcome, ms: Math.round(performance.now() - started) };
    } finally {
      await member.resume();
      await sleep(500);
    }
  };

  it('item 3: with ZooKeeper frozen, waitMs and an abort are honoured during create and clean-up', async () => {
    const names = [uniqueKey('k'), uniqueKey('k2')] as const;
    const timedOut = await whileFrozen((p) => p.acquire(names[0], { waitMs: 300 }));
    const controller = new AbortController();
    const aborted = await whileFrozen((p) => {
      setTimeout(() => controller.abort(new Error('stop')), 100);
      return p.acquire(names[1], { signal: controller.signal });
    });
    // The creates given up on were applied once the server woke: their nodes must not stay.
    const other = open();
    const free: string[] = [];
    for (let waited = 0; waited < 10_000 && free.length < names.length; waited += 250) {
      for (const name of names) {
        if (free.includes(name)) continue;
        const lock = await other.tryAcquire(name);
        if (lock) {
          free.push(name);
          await lock.release();
        }
      }
      if (free.length < names.length) await sleep(250);
    }
    expect(free.sort()).toEqual([...names].sort());
    console.log(
      `item 3: waitMs 300 -> ${timedOut.outcome} after ${timedOut.ms} ms; ` +
        `abort at 100 -> ${aborted.outcome} after ${aborted.ms} ms`,
    );
    expect(timedOut.outcome).not.toBe('granted');
    expect(aborted.outcome).toBe('ABORTED');
    // Correctness bounds, not speed: the answer may not wait for a session timeout (4 s) or a call's.
    expect(timedOut.ms).toBeLessThan(300 + 1_000);
    expect(aborted.ms).toBeLessThan(100 + 1_000);
  }, 40_000);

  it('item 3: a waiter that times out while the server is frozen answers without awaiting its clean-up', async () => {
    const name = uniqueKey('waiting');
    const holder = await (await whileUp()).acquire(name);
    const waiter = await whileUp();
    const member = zk.members[0];
    if (!member) throw new Error('needs a private ZooKeeper');
    const started = performance.now();
    const waiting = waiter.acquire(name, { waitMs: 800 }).then(
      () => 'granted',
      (error: Error & { code?: string }) => error.code ?? error.name,
    );
    await sleep(400); // queued and watching its predecessor
    await member.pause();
    let outcome: string;
    let ms: number;
    try {
      outcome = await waiting;
      ms = Math.round(performance.now() - started);
    } finally {
      await member.resume();
    }
    console.log(`item 3: waiter (waitMs 800) frozen at 400 ms -> ${outcome} after ${ms} ms`);
    expect(outcome).not.toBe('granted');
    expect(ms).toBeLessThan(800 + 1_000);
    await holder.release();
  }, 40_000);

  it('item 5: a client reconnecting through a long outage does not pile abort listeners on its stop signal', async () => {
    const [host, port] = connectString.split(',')[0]?.split(':') ?? [];
    const proxy = await FaultProxy.start({ host: host as string, port: Number(port) });
    const client = await ZkClient.connect(
      { connectString: proxy.address, sessionTimeoutMs: 4_000, callTimeoutMs: 1_000 },
      { timeoutMs: 5_000 },
    );
    const warnings: string[] = [];
    const onWarning = (warning: Error) => {
      if (warning.name === 'MaxListenersExceededWarning') warnings.push(warning.message);
    };
    process.on('warning', onWarning);
    try {
      await proxy.close(); // refused from now on: a reconnect round, then a pause, again and again
      const rounds = () => client.reconnectRoundsForTests;
      for (let waited = 0; rounds() < 16 && waited < 15_000; waited += 100) await sleep(100);
      console.log(`item 5: ${rounds()} reconnect rounds, ${warnings.length} MaxListenersExceeded warnings`);
      expect(rounds()).toBeGreaterThanOrEqual(16);
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      await client.close();
    }
  }, 30_000);

  it('item 5: observe() leaves no watch registration when the consumer stops at a yield', async () => {
    const p = await whileUp();
    const election = p.election(uniqueKey('observed'));
    const leadership = await election.campaign('me');
    // The leader's watch on its own node goes out in the event loop's turn after the grant; a call
    // made after it on the same session is answered after it, so it is counted in the baseline.
    await new Promise((r) => setImmediate(r));
    await p.inspect(uniqueKey('barrier'));
    const baseline = await p.watchCount();
    for (let i = 0; i < 3; i++) {
      for await (const leader of election.observe()) {
        expect(leader?.value).toBe('me');
        break; // the consumer leaves at the yield, with this round's watches armed
      }
    }
    const left = (await p.watchCount()) - baseline;
    console.log(`item 5: ${left} watch registrations left after 3 observers stopped at a yield`);
    expect(left).toBe(0);
    await leadership.resign();
  }, 30_000);
});
