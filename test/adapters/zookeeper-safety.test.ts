import { createHash } from 'node:crypto';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { InvalidArgumentError } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';
import { type PartitionableEnsemble, startPartitionableEnsemble } from '../servers/zk-peer-links.js';

/** Digest credentials of the test's observer, the only identity that may list a refusing folder. */
const OBSERVER = 'observer:secret';
/** Anyone may create and delete nodes; only the observer may list them (or change the ACL). */
const UNLISTABLE = [
  new zookeeper.ACL(
    zookeeper.Permission.CREATE | zookeeper.Permission.DELETE,
    new zookeeper.Id('world', 'anyone'),
  ),
  new zookeeper.ACL(
    zookeeper.Permission.ALL,
    new zookeeper.Id('digest', `observer:${createHash('sha1').update(OBSERVER).digest('base64')}`),
  ),
];

/** Anyone may do anything: the folder's ACL once the test lifts its refusal. */
const OPEN = [new zookeeper.ACL(zookeeper.Permission.ALL, new zookeeper.Id('world', 'anyone'))];

/** A raw client for checks behind the provider's back. */
async function rawClient(connect: string, digest?: string): Promise<zookeeper.Client> {
  const client = zookeeper.createClient(connect, { sessionTimeout: 4_000, retries: 0 });
  await new Promise<void>((ok) => {
    client.once('connected', () => ok());
    client.connect();
  });
  if (digest) client.addAuthInfo('digest', Buffer.from(digest));
  return client;
}

/** A node-zookeeper-client call as a promise. */
function call<T>(
  start: (done: (error: Error | zookeeper.Exception | null, value: T) => void) => void,
): Promise<T> {
  return new Promise<T>((ok, fail) => start((error, value) => (error ? fail(error) : ok(value))));
}

/** Whether path has no children within limitMs: listed again on each change its watch reports. */
async function emptiedWithin(client: zookeeper.Client, path: string, limitMs: number): Promise<boolean> {
  const giveUpAt = performance.now() + limitMs;
  for (;;) {
    let changed!: () => void;
    const change = new Promise<void>((resolve) => {
      changed = resolve;
    });
    const names = await call<string[]>((done) => client.getChildren(path, () => changed(), done));
    if (names.length === 0) return true;
    const left = giveUpAt - performance.now();
    if (left <= 0) return false;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), left);
    });
    const outcome = await Promise.race([change, late]);
    clearTimeout(timer);
    if (outcome === 'late') return false;
  }
}

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

describe('ZooKeeper serverTickMs', () => {
  it('must be a positive number of milliseconds', () => {
    for (const serverTickMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '200' as unknown as number]) {
      expect(() => new ZooKeeperLockProvider({ connectString: '127.0.0.1:2181', serverTickMs })).toThrow(
        InvalidArgumentError,
      );
    }
    expect(
      () => new ZooKeeperLockProvider({ connectString: '127.0.0.1:2181', serverTickMs: 200 }),
    ).not.toThrow();
  });
});

describe('ZooKeeper safety on a 3-node ensemble (tickTime 200, syncLimit 10)', () => {
  let ensemble: PartitionableEnsemble;
  const providers: ZooKeeperLockProvider[] = [];
  beforeAll(async () => {
    ensemble = await startPartitionableEnsemble(200);
  }, 180_000);
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await ensemble?.stop();
  });

  it('a holder on a follower cut off from its peers loses its signal before anyone else is granted', async () => {
    const follower = (await ensemble.settled()).followers[0] as number;
    const other = [0, 1, 2].find((n) => n !== follower) as number;
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

describe('ZooKeeper: the session owns the nodes it created', () => {
  /** The session timeout of the removal tests: a removal that cannot confirm ends the session then. */
  const SESSION_MS = 4_000;
  let zk: ServerGroup;
  const providers: ZooKeeperLockProvider[] = [];
  beforeAll(async () => {
    zk = await startServers('zookeeper', { faults: true });
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await zk?.stop();
  });

  it('a release whose delete is lost is retried by the session: the name is free while the provider stays open', async () => {
    const [host = '', port = ''] = endpoint(zk, 'ZK_CONNECT').split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const options = { sessionTimeoutMs: 4_000, serverTickMs: 200, callTimeoutMs: 500 };
      const holderSide = new ZooKeeperLockProvider({ connectString: proxy.address, ...options });
      const otherSide = new ZooKeeperLockProvider({ connectString: `${host}:${port}`, ...options });
      providers.push(holderSide, otherSide);
      const key = uniqueKey('lost-delete');
      const held = await holderSide.acquire(key);
      const waiting = otherSide.acquire(key, { waitMs: 10_000 });
      waiting.catch(() => undefined); // awaited below
      await new Promise((r) => setTimeout(r, 300)); // the waiter is queued behind the holder

      proxy.setMode({ kind: 'blackhole' }); // the delete goes into the void and times out
      const releasedAt = performance.now();
      const release = await held.release().then(
        () => 'confirmed',
        (error: Error) => error.name,
      );
      await new Promise((r) => setTimeout(r, 700)); // well inside the session's deadline
      proxy.setMode({ kind: 'pass' });
      proxy.cutAll(); // the client reconnects to the same, live session

      const outcome = await waiting.then(
        (lock) => ({ lock, at: performance.now() - releasedAt }),
        (error: Error) => ({ lock: undefined, at: performance.now() - releasedAt, error: error.name }),
      );
      console.log(
        `release: ${release}; other side: ${outcome.lock ? 'granted' : outcome.error} at ${outcome.at.toFixed(0)} ms`,
      );
      expect(holderSide.closed).toBe(false);
      expect(outcome.lock).toBeDefined();
      expect(outcome.at).toBeLessThan(5_000);
      await outcome.lock?.release();
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it('a waiter whose clean-up delete is lost leaves no node behind: the session retries it', async () => {
    const [host = '', port = ''] = endpoint(zk, 'ZK_CONNECT').split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const options = { sessionTimeoutMs: 4_000, serverTickMs: 200, callTimeoutMs: 500 };
      const direct = { connectString: `${host}:${port}`, ...options };
      const holderSide = new ZooKeeperLockProvider(direct);
      const waiterSide = new ZooKeeperLockProvider({ connectString: proxy.address, ...options });
      const thirdSide = new ZooKeeperLockProvider(direct);
      providers.push(holderSide, waiterSide, thirdSide);
      const key = uniqueKey('lost-cancel');
      const held = await holderSide.acquire(key);
      await (await thirdSide.acquire(uniqueKey('warm-up'))).release();
      const startedAt = performance.now();
      const waiting = waiterSide.acquire(key, { waitMs: 1_500 }).then(
        () => 'granted',
        (error: Error) => error.name,
      );
      await new Promise((r) => setTimeout(r, 800));
      proxy.setMode({ kind: 'blackhole' }); // the wait runs out in here: its delete goes nowhere
      // The wait runs out either on a connection that looks up, or after the session gave the
      // silent server up (an unanswered heartbeat drops it), which the provider reports as an outage.
      expect(['LockTimeoutError', 'BackendUnavailableError']).toContain(await waiting);
      await new Promise((r) => setTimeout(r, Math.max(0, startedAt + 2_300 - performance.now())));
      proxy.setMode({ kind: 'pass' });
      proxy.cutAll(); // the waiter's client reconnects to the same, live session
      await new Promise((r) => setTimeout(r, 1_000));
      const releasedAt = performance.now();
      await held.release();
      const outcome = await thirdSide.acquire(key, { waitMs: 6_000 }).then(
        (lock) => ({ lock, at: performance.now() - releasedAt }),
        (error: Error) => ({ lock: undefined, at: performance.now() - releasedAt, error: error.name }),
      );
      console.log(
        `third side: ${outcome.lock ? 'granted' : outcome.error} ${outcome.at.toFixed(0)} ms after the holder's release`,
      );
      expect(waiterSide.closed).toBe(false);
      expect(outcome.lock).toBeDefined();
      await outcome.lock?.release();
    } finally {
      await proxy.close();
    }
  }, 40_000);

  it('a session written off here but alive on the server is closed: its nodes do not block the name', async () => {
    const [host = '', port = ''] = endpoint(zk, 'ZK_CONNECT').split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const options = { sessionTimeoutMs: 4_000, serverTickMs: 200, callTimeoutMs: 1_000 };
      const holderSide = new ZooKeeperLockProvider({ connectString: proxy.address, ...options });
      const otherSide = new ZooKeeperLockProvider({ connectString: `${host}:${port}`, ...options });
      providers.push(holderSide, otherSide);
      const key = uniqueKey('written-off');
      const held = await holderSide.acquire(key);
      await (await otherSide.acquire(uniqueKey('warm-up'))).release();
      // Late replies: the server hears every ping (the session lives there), the holder cannot
      // confirm it in time and writes it off.
      proxy.setMode({ kind: 'delay', direction: 'toClient', ms: 5_000 });
      expect(await abortTime(held.signal, performance.now(), 10_000)).toBeDefined();
      proxy.setMode({ kind: 'pass' });
      await new Promise((r) => setTimeout(r, 1_000));
      const releasedAt = performance.now();
      await held.release().catch(() => undefined);
      const outcome = await otherSide.acquire(key, { waitMs: 10_000 }).then(
        (lock) => ({ lock, at: performance.now() - releasedAt }),
        (error: Error) => ({ lock: undefined, at: performance.now() - releasedAt, error: error.name }),
      );
      console.log(
        `other side: ${outcome.lock ? 'granted' : outcome.error} ${outcome.at.toFixed(0)} ms after release()`,
      );
      expect(holderSide.closed).toBe(false);
      expect(outcome.lock).toBeDefined();
      await outcome.lock?.release();
    } finally {
      await proxy.close();
    }
  }, 40_000);

  /** A victim provider behind a proxy, a direct one, and an observer that alone may list the folder. */
  async function refusedRemovalSetup() {
    const connectString = endpoint(zk, 'ZK_CONNECT');
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    const options = { sessionTimeoutMs: SESSION_MS, serverTickMs: 200, callTimeoutMs: 500 };
    const victim = new ZooKeeperLockProvider({ connectString: proxy.address, ...options });
    const other = new ZooKeeperLockProvider({ connectString, ...options });
    providers.push(victim, other);
    const observer = await rawClient(connectString, OBSERVER);
    return { proxy, victim, other, observer };
  }

  /**
   * An acquire whose create reaches the server but whose answer is lost, in a folder that lets
   * anyone create and delete nodes but only the observer list them: the request can never find its
   * node again to delete it, and its removal keeps failing.
   */
  async function nodeWithRefusedRemoval(setup: Awaited<ReturnType<typeof refusedRemovalSetup>>) {
    const { proxy, victim, observer } = setup;
    const key = uniqueKey('removal-refused');
    const folder = victim.folder(key);
    await call<string>((done) => observer.mkdirp(folder.slice(0, folder.lastIndexOf('/')), done));
    await call<string>((done) => observer.create(folder, Buffer.alloc(0), UNLISTABLE, done));
    await (await victim.acquire(uniqueKey('warm-up'))).release(); // the victim's session is open
    let lostAnswer = false;
    proxy.cutAfterRequest(
      (chunk) => chunk.includes(`${folder}/_c_`),
      () => {
        lostAnswer = true;
      },
    );
    const failed = await victim.acquire(key, { waitMs: 1_000 }).then(
      () => 'granted',
      (error: Error) => error.name,
    );
    expect(failed).not.toBe('granted');
    expect(lostAnswer).toBe(true); // the create reached the server and its answer was lost
    expect(await call<string[]>((done) => observer.getChildren(folder, done))).toHaveLength(1);
    return { key, folder, failed };
  }

  it('a node whose removal keeps failing does not outlive it: the session is closed and the name is free again', async () => {
    const setup = await refusedRemovalSetup();
    const { proxy, victim, other, observer } = setup;
    try {
      const { key, folder, failed } = await nodeWithRefusedRemoval(setup);
      const failedAt = performance.now();
      // Its removal cannot confirm (each listing is refused) within a session timeout: the session
      // is closed and the server deletes the node with it. The bound leaves room for a slow machine.
      const emptied = await emptiedWithin(observer, folder, 3 * SESSION_MS);
      console.log(
        `acquire: ${failed}; the node ${emptied ? `went ${(performance.now() - failedAt).toFixed(0)} ms later` : 'stayed'}`,
      );
      expect(emptied).toBe(true);

      await call<unknown>((done) => observer.setACL(folder, OPEN, -1, done));
      await (await other.acquire(key, { waitMs: SESSION_MS })).release();
      expect(victim.closed).toBe(false); // a new session serves the victim's later calls
      await (await victim.acquire(key, { waitMs: SESSION_MS })).release();
    } finally {
      observer.close();
      await proxy.close();
    }
  }, 60_000);

  it("close() does not wait for a removal that keeps failing: the session's end takes the node", async () => {
    const setup = await refusedRemovalSetup();
    const { proxy, victim, observer } = setup;
    try {
      const { folder } = await nodeWithRefusedRemoval(setup);
      const closing = performance.now();
      await victim.close();
      const closedIn = performance.now() - closing;
      const emptied = await emptiedWithin(observer, folder, 3 * SESSION_MS);
      console.log(`close() took ${closedIn.toFixed(0)} ms; the node ${emptied ? 'went' : 'stayed'}`);
      // close() is bounded by callTimeoutMs (500 ms): far less than the removal's session timeout.
      expect(closedIn).toBeLessThan(SESSION_MS);
      expect(emptied).toBe(true);
    } finally {
      observer.close();
      await proxy.close();
    }
  }, 60_000);

  it('a holder whose node is deleted behind its back loses its signal on the watch event, not at a heartbeat', async () => {
    const connectString = endpoint(zk, 'ZK_CONNECT');
    const options = { connectString, sessionTimeoutMs: 4_000, serverTickMs: 200 };
    const first = new ZooKeeperLockProvider(options);
    const second = new ZooKeeperLockProvider(options);
    providers.push(first, second);
    const raw = zookeeper.createClient(connectString, { retries: 0 });
    await new Promise<void>((ok) => {
      raw.once('connected', () => ok());
      raw.connect();
    });
    const removeBehindTheirBack = async (provider: ZooKeeperLockProvider, key: string) => {
      const parent = provider.folder(key);
      const [node] = await new Promise<string[]>((ok, fail) =>
        raw.getChildren(parent, (e, c) => (e ? fail(e) : ok(c))),
      );
      const deletedAt = performance.now();
      await new Promise<void>((ok, fail) => raw.remove(`${parent}/${node}`, -1, (e) => (e ? fail(e) : ok())));
      return deletedAt;
    };
    try {
      // Uncontended: the watch is set by the first read of our node.
      const key = uniqueKey('deleted-node');
      const lock = await first.acquire(key);
      const deletedAt = await removeBehindTheirBack(first, key);
      const uncontended = await abortTime(lock.signal, deletedAt, 5_000);
      // After waiting behind another holder: the same watch, armed while it queued.
      const key2 = uniqueKey('deleted-node-waited');
      const ahead = await first.acquire(key2);
      const waiting = second.acquire(key2, { waitMs: 5_000 });
      await new Promise((r) => setTimeout(r, 200));
      await ahead.release();
      const waited = await waiting;
      const deletedAt2 = await removeBehindTheirBack(second, key2);
      const afterWait = await abortTime(waited.signal, deletedAt2, 5_000);
      console.log(
        `signal aborted ${uncontended?.toFixed(0) ?? 'never (5 s)'} ms after the delete (uncontended), ` +
          `${afterWait?.toFixed(0) ?? 'never (5 s)'} ms (after waiting)`,
      );
      expect(uncontended).toBeDefined();
      expect(uncontended as number).toBeLessThan(500); // a heartbeat is 1.3 s away, the deadline 3.7 s
      expect(afterWait).toBeDefined();
      expect(afterWait as number).toBeLessThan(500);
      expect(lock.held).toBe(false);
      await lock.release();
      await waited.release();
    } finally {
      raw.close();
    }
  }, 30_000);
});
