import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { MARKER_NAME } from '../../adapters/zookeeper/lock-delay.js';
import { connect, type LeaderInfo } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';
import { stopChild } from '../servers/processes.js';
import { awaitEnsembleServing } from '../servers/zk-quorum.js';
import { contendThroughLeaderKill, expectGrantedAfterDelay, expectOneWakeupPerRelease } from './scenarios.js';

const root = resolve(import.meta.dirname, '../..');
const CREATE_OP = 15; // ZooKeeper request type of create2 (create answering with the Stat)

/** A raw client for checks behind the provider's back. */
async function rawClient(
  connect: string,
  { digest, sessionTimeoutMs = 4_000 }: { digest?: string; sessionTimeoutMs?: number } = {},
): Promise<zookeeper.Client> {
  const client = zookeeper.createClient(connect, { sessionTimeout: sessionTimeoutMs, retries: 0 });
  await new Promise<void>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error('no session')), 10_000);
    client.once('connected', () => {
      clearTimeout(timer);
      ok();
    });
    client.connect();
  });
  if (digest) client.addAuthInfo('digest', Buffer.from(digest));
  return client;
}
type ProviderOptions = ConstructorParameters<typeof ZooKeeperLockProvider>[0];

/** Opens providers on a describe's server with its defaults, and closes them all at its end. */
function providersOf(defaults: () => ProviderOptions) {
  const opened: ZooKeeperLockProvider[] = [];
  return {
    open(options: Partial<ProviderOptions> = {}) {
      const provider = new ZooKeeperLockProvider({ ...defaults(), ...options });
      opened.push(provider);
      return provider;
    },
    closeAll: () => Promise.allSettled(opened.map((p) => p.close())),
  };
}
const children = (client: zookeeper.Client, path: string) =>
  new Promise<string[]>((ok, fail) =>
    client.getChildren(path, (e, c) => {
      if (!e) ok(c);
      else if ((e as zookeeper.Exception).getName?.() === 'NO_NODE') ok([]);
      else fail(e);
    }),
  );

describe('ZooKeeper adapter on a real server', () => {
  let zk: ServerGroup;
  let connectString: string;
  let raw: zookeeper.Client;
  const providers = providersOf(() => ({
    connectString,
    sessionTimeoutMs: 2_000,
    serverTickMs: 200, // the test servers' tickTime
  }));
  const open = providers.open;
  beforeAll(async () => {
    zk = await startServers('zookeeper');
    connectString = endpoint(zk, 'ZK_CONNECT');
    raw = await rawClient(connectString);
  });
  afterAll(async () => {
    await providers.closeAll();
    raw?.close();
    await zk?.stop();
  });

  it('uses Curator’s node names and the czxid as token, which rises even when sequences restart', async () => {
    const provider = open({ root: '' });
    const name = `curator-${crypto.randomUUID()}`;
    const first = await provider.acquire(name);
    const [node] = await children(raw, `/${name}`);
    expect(node).toMatch(/^_c_[0-9a-f-]{36}-lock-0000000000$/);
    await first.release();
    await eventually(
      'the empty folder is removed after its linger time',
      async () => !(await children(raw, '/')).includes(name),
    );
    const second = await provider.acquire(name);
    const [again] = await children(raw, `/${name}`);
    expect(again).toMatch(/-lock-0000000000$/); // the sequence restarted with the new folder
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken); // the token did not
    await second.release();
  });

  it('connect("zk://…/chroot") opens a provider under the chroot', async () => {
    await new Promise<void>((ok) => raw.mkdirp('/tenant-a', () => ok()));
    const provider = await connect(`zk://${connectString}/tenant-a`);
    try {
      expect(provider.backend).toBe('zookeeper');
      const lock = await provider.acquire('jobs/nightly');
      expect((await children(raw, '/tenant-a/fencekit/locks/jobs/nightly')).length).toBe(1);
      await lock.release();
    } finally {
      await provider.close();
    }
  });

  it('protection: a create whose reply is lost leaves exactly one node, adopted by the lock', async () => {
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const provider = open({ connectString: proxy.address, callTimeoutMs: 3_000 });
      const holder = open();
      const key = uniqueKey('protection');
      const held = await holder.acquire(key); // the folder exists: our create will succeed
      await provider.inspect(key); // our session exists before the fault
      proxy.cutAfterRequest((chunk) => chunk.length >= 12 && chunk.readInt32BE(8) === CREATE_OP);
      const waiting = provider.acquire(key, { waitMs: 10_000 });
      await eventually(
        'the create reached the server and its answer was lost',
        async () => proxy.accepted > 1,
      );
      await eventually(
        'exactly one node of ours queued',
        async () => (await holder.inspect(key))?.waiters === 1,
      );
      await held.release();
      const lock = await waiting;
      expect(await children(raw, provider.folder(key))).toHaveLength(1);
      const other = open();
      expect(await other.tryAcquire(key)).toBeNull();
      await lock.release();
      expect(await children(raw, provider.folder(key))).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  // A waiter next in line is granted on the head's deletion without a listing only while its watch
  // on the lock-delay marker's path stayed quiet on one connection: after a reconnect the server
  // re-fires watches in an order of its own, so the waiter lists, and a marker made while it was
  // away is waited out.
  it('a waiter next in line that reconnects as the head goes lists again and waits out a marker made meanwhile', async () => {
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    const create = (path: string, mode: number, data = Buffer.alloc(0)) =>
      new Promise<string>((ok, fail) => raw.create(path, data, mode, (e, made) => (e ? fail(e) : ok(made))));
    try {
      const waiter = open({ connectString: proxy.address, sessionTimeoutMs: 4_000 });
      const key = uniqueKey('next-in-line-reconnect');
      await (await waiter.acquire(key)).release(); // the session and the folder exist now
      const folder = waiter.folder(key);
      const head = await create(
        `${folder}/_c_${crypto.randomUUID()}-lock-`,
        zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL,
      );
      const waiting = waiter.acquire(key, { waitMs: 30_000 });
      await eventually(
        'the waiter is second in line',
        async () => (await children(raw, folder)).length === 2,
      );
      await new Promise((r) => setTimeout(r, 300)); // its watches set, as a rule
      proxy.setMode({ kind: 'refuse' });
      const delayMs = 1_500;
      const headName = head.slice(head.lastIndexOf('/') + 1);
      await create(
        `${folder}/${MARKER_NAME}`,
        zookeeper.CreateMode.PERSISTENT,
        Buffer.from(`${headName} ${delayMs}`),
      );
      await new Promise<void>((ok, fail) => raw.remove(head, -1, (e) => (e ? fail(e) : ok())));
      const deleted = performance.now();
      proxy.setMode({ kind: 'pass' });
      await expectGrantedAfterDelay(waiting, deleted, delayMs);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it('a disconnection shorter than the deadline keeps the lock; the session carries on', async () => {
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const provider = open({ connectString: proxy.address, sessionTimeoutMs: 4_000, callTimeoutMs: 500 });
      const key = uniqueKey('short-cut');
      const lock = await provider.acquire(key);
      proxy.setMode({ kind: 'blackhole' });
      await new Promise((r) => setTimeout(r, 1_000)); // well inside 4 s × 0.99 − rtt
      proxy.setMode({ kind: 'pass' });
      proxy.cutAll(); // the client reconnects to the same session
      await new Promise((r) => setTimeout(r, 2_000));
      expect(lock.held).toBe(true);
      expect((await open().inspect(key))?.holder?.fencingToken).toBe(lock.fencingToken);
      await lock.release();
    } finally {
      await proxy.close();
    }
  });

  it('creator-only ACL: another identity cannot delete a held lock node', async () => {
    const provider = open({ digest: 'alice:secret', creatorOnlyAcl: true });
    const key = uniqueKey('acl');
    const lock = await provider.acquire(key);
    const alice = await rawClient(connectString, { digest: 'alice:secret' });
    const [node] = await children(alice, provider.folder(key));
    alice.close();
    expect(node).toMatch(/-lock-/);
    await expect(children(raw, provider.folder(key))).rejects.toMatchObject({ name: 'NO_AUTH' });
    const mallory = await rawClient(connectString, { digest: 'mallory:guess' });
    try {
      const error = await new Promise<zookeeper.Exception | null>((ok) =>
        mallory.remove(`${provider.folder(key)}/${node}`, -1, (e) => ok(e as zookeeper.Exception | null)),
      );
      expect(error?.getName()).toBe('NO_AUTH');
      expect(lock.held).toBe(true);
    } finally {
      mallory.close();
    }
    await lock.release();
  });

  it('creator-only ACL: another identity cannot delete a read-write lock node', async () => {
    const provider = open({ digest: 'alice:secret', creatorOnlyAcl: true });
    const rw = provider.readWriteLock(uniqueKey('rw-acl'));
    const write = await rw.acquireWrite();
    const alice = await rawClient(connectString, { digest: 'alice:secret' });
    const [node] = await children(alice, provider.folder(rw.name));
    alice.close();
    expect(node).toMatch(/-__WRIT__\d+$/);
    await expect(children(raw, provider.folder(rw.name))).rejects.toMatchObject({ name: 'NO_AUTH' });
    const mallory = await rawClient(connectString, { digest: 'mallory:guess' });
    try {
      const error = await new Promise<zookeeper.Exception | null>((ok) =>
        mallory.remove(`${provider.folder(rw.name)}/${node}`, -1, (e) => ok(e as zookeeper.Exception | null)),
      );
      expect(error?.getName()).toBe('NO_AUTH');
      expect(write.held).toBe(true);
    } finally {
      mallory.close();
    }
    await write.release();
  });

  it("creator-only ACL: another identity's acquire, inspect, read-write lock and semaphore are AUTH_FAILED at once, not retried", async () => {
    const alice = open({ digest: 'alice:secret', creatorOnlyAcl: true });
    const mallory = open({ digest: 'mallory:guess', creatorOnlyAcl: true });
    const key = uniqueKey('acl-refused');
    const lock = await alice.acquire(key);
    const rw = await alice.readWriteLock(uniqueKey('acl-refused-rw')).acquireWrite();
    const sem = await alice.semaphore(uniqueKey('acl-refused-sem'), { limit: 1 }).acquire();
    try {
      const uses: Record<string, () => Promise<unknown>> = {
        acquire: () => mallory.acquire(key, { waitMs: 60_000 }),
        inspect: () => mallory.inspect(key),
        'read-write': () => mallory.readWriteLock(rw.key).acquireRead({ waitMs: 60_000 }),
        semaphore: () => mallory.semaphore(sem.key, { limit: 1 }).acquire({ waitMs: 60_000 }),
      };
      for (const [what, use] of Object.entries(uses)) {
        const started = performance.now();
        const error = await use().then(
          () => undefined,
          (e: unknown) => e as { code?: string; message?: string },
        );
        expect(error?.code, `${what}: ${error?.message}`).toBe('AUTH_FAILED');
        expect(error?.message).toMatch(/^zookeeper at 127\.0\.0\.1:\d+: a node's ACL refuses/);
        expect(performance.now() - started, what).toBeLessThan(30_000);
      }
    } finally {
      await Promise.all([lock.release(), rw.release(), sem.release()]);
    }
  });

  it('guardedMulti commits only while the lock is held', async () => {
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const stale = open({ connectString: proxy.address, callTimeoutMs: 500 });
      const fresh = open();
      const key = uniqueKey('multi');
      await new Promise<void>((ok) => raw.mkdirp('/balances/acct-1', () => ok()));
      const a = await stale.acquire(key);
      expect(await stale.guardedMulti(a, (tx) => tx.setData('/balances/acct-1', Buffer.from('A1')))).toBe(
        true,
      );
      proxy.setMode({ kind: 'blackhole' });
      const b = await fresh.acquire(key, { waitMs: 10_000 }); // A's session expired on the server
      expect(a.signal.aborted).toBe(true);
      expect(await fresh.guardedMulti(b, (tx) => tx.setData('/balances/acct-1', Buffer.from('B1')))).toBe(
        true,
      );
      proxy.setMode({ kind: 'pass' });
      proxy.cutAll();
      // A's session is gone: its guarded write cannot commit (it fails or reports false).
      const late = await stale
        .guardedMulti(a, (tx) => tx.setData('/balances/acct-1', Buffer.from('A2')))
        .catch(() => false);
      expect(late).toBe(false);
      const value = await new Promise<string>((ok) =>
        raw.getData('/balances/acct-1', (_e, d) => ok(String(d))),
      );
      expect(value).toBe('B1');
      await b.release();
    } finally {
      await proxy.close();
    }
  });

  it('1,000 acquire/release cycles leave no node behind', async () => {
    const provider = open();
    const key = uniqueKey('cycles');
    for (let i = 0; i < 1_000; i++) await (await provider.acquire(key)).release();
    expect(await children(raw, provider.folder(key))).toEqual([]); // no lock node left
    await provider.close(); // deletes lingering empty folders at once
    const parent = provider.folder(key).split('/').slice(0, -1).join('/');
    expect(await children(raw, parent)).not.toContain(key.split('/').at(-1));
  }, 60_000);

  it("abandon() (the conformance suites' crash) leaves the session to expire: the node outlives the connection", async () => {
    // Regression: abandon() ended the session's state first, whose listener closed the session
    // through the still-open connection (closeSession), so the node went at once, unlike a crash.
    const holder = open({ sessionTimeoutMs: 4_000 });
    const key = uniqueKey('abandon');
    const lock = await holder.acquire(key);
    const path = `/fencekit/locks/${key}`;
    const before = await children(raw, path);
    expect(before).toHaveLength(1);
    await holder.abandon();
    await new Promise((r) => setTimeout(r, 500)); // well inside the 4 s session
    expect(await children(raw, path), 'the node is gone before the session expired').toEqual(before);
    expect(lock.held).toBe(false); // the holder itself knows at once
    const next = open();
    await eventually(
      'the server expires the session and frees the name',
      async () => (await next.tryAcquire(key)) !== null,
      15_000,
    );
  });

  it('a SIGKILLed holder process: the next waiter is granted within the session timeout + 1 s', async () => {
    const key = uniqueKey('sigkill');
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { ZooKeeperLockProvider } from '${root}/dist/zookeeper.js';
         const p = new ZooKeeperLockProvider({ connectString: ${JSON.stringify(connectString)}, sessionTimeoutMs: 2000 });
         const lock = await p.acquire(${JSON.stringify(key)});
         console.log('held ' + lock.fencingToken);
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      const [line] = (await Promise.race([
        once(child.stdout as NodeJS.ReadableStream, 'data'),
        once(child, 'exit').then(() => {
          throw new Error('the holder process exited before holding the lock');
        }),
      ])) as [Buffer];
      expect(line.toString()).toMatch(/^held \d+/);
      const waiter = open();
      const timeout = await waiter.sessionTimeoutMs();
      const waiting = waiter.acquire(key, { waitMs: 10_000 });
      await eventually('queued', async () => (await waiter.inspect(key))?.waiters === 1);
      const killedAt = performance.now();
      await stopChild(child, 'SIGKILL');
      const lock = await waiting;
      expect(performance.now() - killedAt).toBeLessThan(timeout + 1_000);
      await lock.release();
    } finally {
      await stopChild(child, 'SIGKILL');
    }
  });

  it('election: campaign, proclaim, observe (with "no leader"), resign; terms rise', async () => {
    const name = uniqueKey('election');
    const [a, b] = [open().election(name), open().election(name)];
    const seen: Array<LeaderInfo | null> = [];
    const controller = new AbortController();
    const watching = (async () => {
      for await (const leader of b.observe({ signal: controller.signal })) seen.push(leader);
    })();
    const observed = (value: string | null) =>
      eventually(`observe() reports ${value}`, async () => (seen.at(-1)?.value ?? null) === value);
    await observed(null);
    const termA = await a.campaign('node-a');
    await observed('node-a');
    const bCampaign = b.campaign('node-b', { waitMs: 10_000 });
    await termA.proclaim('node-a:8080');
    await observed('node-a:8080');
    expect((await b.leader())?.term).toBe(termA.term);
    await termA.resign();
    await expect(termA.proclaim('late')).rejects.toMatchObject({ code: 'NOT_HOLDER' });
    const termB = await bCampaign;
    expect(termB.term).toBeGreaterThan(termA.term);
    await observed('node-b');
    await termB.resign();
    await observed(null);
    controller.abort();
    await watching;
  });

  it("a semaphore's internal mutex is neither listed nor force-released (that would stall the semaphore)", async () => {
    const audit: unknown[] = [];
    const record = (...args: unknown[]) => audit.push(args[0]);
    const [holder, waiter] = [open(), open()];
    const operator = open({ logger: { info: record, warn: record, error: record } });
    const name = uniqueKey('sem-internals');
    const held = await holder.semaphore(name, { limit: 1 }).acquire();
    const waiting = waiter.semaphore(name, { limit: 1 }).acquire({ waitMs: 10_000 });
    await eventually('the waiter holds the mutex', async () =>
      Boolean((await children(raw, `/fencekit/locks/${name}/locks`)).length),
    );
    expect(await operator.list(name)).toEqual([]);
    await expect(operator.forceRelease(`${name}/locks`, { reason: 'test' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(audit).toEqual([]); // a refusal removed nothing: no "unknown outcome" record
    await held.release();
    await (await waiting).release(); // the semaphore still hands over
  });
});

// 101 sessions in one test process: on a busy machine their heartbeats come late, and a lost
// session's node going wakes its successor, which is not a herd. This server's 1 s tick lets
// sessions last 20 s, so that only a herd can make the count go over.
describe('ZooKeeper adapter with 100 waiters on one name', () => {
  const TICK_MS = 1_000;
  const SESSION_MS = 20 * TICK_MS; // the longest the server grants
  let zk: ServerGroup;
  let raw: zookeeper.Client;
  const providers = providersOf(() => ({
    connectString: endpoint(zk, 'ZK_CONNECT'),
    sessionTimeoutMs: SESSION_MS,
    serverTickMs: TICK_MS,
  }));
  const open = () => providers.open();
  beforeAll(async () => {
    zk = await startServers('zookeeper', { tickMs: TICK_MS });
    raw = await rawClient(endpoint(zk, 'ZK_CONNECT'), { sessionTimeoutMs: SESSION_MS });
  });
  afterAll(async () => {
    await providers.closeAll();
    raw?.close();
    await zk?.stop();
  });

  it('each release triggers at most one watch wake-up; no node is left', async () => {
    const key = uniqueKey('herd-100');
    const holder = open();
    expect(await holder.sessionTimeoutMs(), 'the session the server granted').toBe(SESSION_MS);
    const waiters = Array.from({ length: 100 }, () => open());
    await expectOneWakeupPerRelease(holder, waiters, key);
    expect(await children(raw, holder.folder(key))).toEqual([]);
  }, 120_000);
});

describe('ZooKeeper adapter on a 3-node ensemble with faults', () => {
  let ensemble: ServerGroup;
  beforeAll(async () => {
    ensemble = await startServers('zookeeper', { size: 3, faults: true });
  }, 180_000); // the script, then the ensemble serving (each within 60 s; zk-quorum.ts)
  afterAll(() => ensemble?.stop());

  it('killing the leader during contention: no overlapping grants, tokens still rise', async () => {
    const connectString = endpoint(ensemble, 'ZK_CONNECT');
    const clients = Array.from(
      { length: 4 },
      () => new ZooKeeperLockProvider({ connectString, sessionTimeoutMs: 4_000, callTimeoutMs: 1_000 }),
    );
    const { monitor } = await contendThroughLeaderKill(clients, uniqueKey('leader-kill'), async () => {
      await ensemble.members[await findLeader(ensemble)]?.kill();
    });
    expect(monitor.entries).toBeGreaterThan(20);
  }, 60_000);
});

async function findLeader(group: ServerGroup): Promise<number> {
  // One leader, the others following and serving writes (within a generous deadline).
  return (await awaitEnsembleServing(group.members.map((m) => m.address))).leader;
}
