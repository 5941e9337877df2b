import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { BackendUnavailableError, runAsLeader } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';
import { controls } from './zookeeper-control.js';

const root = resolve(import.meta.dirname, '../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** 3 rounds in CI; FENCEKIT_ZK_FAULT_ROUNDS=20 by hand. */
const ROUNDS = Number(process.env.FENCEKIT_ZK_FAULT_ROUNDS ?? 3);
const SESSION_MS = 2_000;
/** A test of fault rounds: start-up plus each round's fault and recovery, with room for a slow machine. */
const ROUND_BUDGET_MS = 30_000 + ROUNDS * 20_000;
/** Pause length: 1.5 s past the session timeout in CI; FENCEKIT_ZK_PAUSE_MS=8000 is issue 13's case. */
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
  /** The signals of terms under way: a term whose session survived the fault keeps leading. */
  const leading = new Set<AbortSignal>();
  const election = uniqueKey('fault-election');
  const lockKey = uniqueKey('fault-lock');
  const runs = providers.slice(0, 2).map((provider, i) =>
    runAsLeader(
      provider,
      election,
      async ({ signal, term }) => {
        terms.push(term);
        leading.add(signal);
        await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
        leading.delete(signal);
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
        await sleep(50); // the backend is away: the fault under test
      }
    }
  });
  return {
    terms,
    lockTokens,
    get leaders() {
      return [...leading].filter((s) => !s.aborted).length;
    },
    async stop() {
      stop.abort();
      await Promise.all([...runs, ...lockers]);
      await Promise.all(providers.map((p) => p.close()));
    },
  };
}

/** Rounds of a fault while the workload runs: after each, one leader leads and new locks come. */
async function faultRounds(connectString: string, fault: (round: number) => Promise<void>) {
  const load = workload(connectString);
  try {
    await eventually(
      'a first leader and a first lock',
      async () => load.terms.length > 0 && load.lockTokens.length > 0,
      10_000,
    );
    for (let round = 0; round < ROUNDS; round++) {
      await fault(round);
      const locks = load.lockTokens.length;
      await eventually(
        `round ${round}: one leader and new locks after the fault`,
        async () => load.leaders === 1 && load.lockTokens.length > locks + 2,
        15_000,
      );
    }
    for (let i = 1; i < load.terms.length; i++) {
      expect(load.terms[i]).toBeGreaterThan(load.terms[i - 1] as bigint);
    }
    for (let i = 1; i < load.lockTokens.length; i++) {
      expect(load.lockTokens[i]).toBeGreaterThan(load.lockTokens[i - 1] as bigint);
    }
  } finally {
    await load.stop();
  }
}

/**
 * A loopback proxy that, when armed, delivers only the first half of the server's next reply and
 * then closes the connection: a frame cut in the middle.
 */
async function cuttingProxy(target: string) {
  const [host = '', port = ''] = target.split(':');
  let armed = false;
  let accepted = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    accepted += 1;
    const upstream = net.connect(Number(port), host);
    sockets.add(client).add(upstream);
    const end = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.on('data', (d) => upstream.write(d));
    upstream.on('data', (d: Buffer) => {
      if (armed && d.length > 8) {
        armed = false;
        upstream.destroy();
        client.end(d.subarray(0, Math.floor(d.length / 2)));
      } else client.write(d);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    arm: () => {
      armed = true;
    },
    get armed() {
      return armed;
    },
    get accepted() {
      return accepted;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((ok) => server.close(ok));
    },
  };
}

describe('ZooKeeper standalone server faults', () => {
  let zk: ServerGroup;
  let connectString: string;
  const providers: ZooKeeperLockProvider[] = [];
  const open = (options: Partial<ConstructorParameters<typeof ZooKeeperLockProvider>[0]> = {}) => {
    const provider = new ZooKeeperLockProvider({ connectString, sessionTimeoutMs: SESSION_MS, ...options });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    zk = await startServers('zookeeper', { faults: true });
    connectString = endpoint(zk, 'ZK_CONNECT');
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await zk?.stop();
  });

  it(
    'SIGSTOP past the session timeout, then SIGCONT: the process survives, leadership and locks come back',
    async () => {
      const server = controls(zk);
      await faultRounds(connectString, async () => {
        server.pause(0);
        await sleep(PAUSE_MS);
        server.resume(0);
      });
    },
    ROUND_BUDGET_MS,
  );

  it(
    'SIGKILL and restart: the process survives, leadership and locks come back',
    async () => {
      const server = controls(zk);
      await faultRounds(connectString, async () => {
        await server.kill(0);
        await server.start(0);
      });
    },
    ROUND_BUDGET_MS,
  );

  it('a reply cut in the middle of its frame: the connection ends, the session and the lock carry on', async () => {
    const proxy = await cuttingProxy(connectString);
    try {
      const provider = open({ connectString: proxy.address, sessionTimeoutMs: 4_000 });
      const key = uniqueKey('cut-frame');
      const lock = await provider.acquire(key);
      for (let round = 0; round < 3; round++) {
        const before = proxy.accepted;
        proxy.arm();
        await provider.inspect(key).catch(() => null); // its reply is the one cut (or the next ping's)
        await eventually('the cut happened and the client reconnected', async () => proxy.accepted > before);
        await eventually(
          'the provider answers again, with our grant',
          async () =>
            (await provider.inspect(key).catch(() => null))?.holder?.fencingToken === lock.fencingToken,
        );
      }
      expect(lock.held).toBe(true);
      await lock.release();
      expect(await open().inspect(key)).toBeNull();
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it('a session written off locally is closed at once: the server drops its node', async () => {
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const slow = open({ connectString: proxy.address });
      const key = uniqueKey('written-off');
      const lock = await slow.acquire(key);
      // Replies now take 1.2 s: too late to confirm a 2 s session, soon enough to keep it alive.
      proxy.setMode({ kind: 'latency', ms: 600 });
      await eventually('the holder gives the lock up', async () => lock.signal.aborted);
      const started = performance.now();
      const next = await open().acquire(key, { waitMs: 6_000 });
      console.log(`next holder granted ${Math.round(performance.now() - started)} ms after the loss`);
      await next.release();
    } finally {
      await proxy.close();
    }
  }, 20_000);

  it('concurrent calls that find the session lost share one new session', async () => {
    const provider = open();
    const key = uniqueKey('one-session');
    await (await provider.acquire(`${key}/warm`)).release();
    await provider.abandon(); // the session is lost; the next calls must open one, not one each
    const locks = await Promise.all(Array.from({ length: 20 }, (_, i) => provider.acquire(`${key}/${i}`)));
    const owners = new Set<bigint>();
    for (const lock of locks) owners.add(await ownerOf(connectString, provider.folder(lock.key)));
    expect([...owners].filter((o) => o !== 0n)).toHaveLength(1);
    await Promise.all(locks.map((l) => l.release()));
  }, 30_000);

  it('after close(), nothing keeps the process alive, even when calls raced to replace a lost session', async () => {
    // A process of its own (the built package): it exits by itself only if no socket or timer is left.
    const program = `import { ZooKeeperLockProvider } from '${root}/dist/zookeeper.js';
      const p = new ZooKeeperLockProvider({ connectString: ${JSON.stringify(connectString)}, sessionTimeoutMs: 2000 });
      await (await p.acquire('exit-check/warm')).release();
      await p.abandon(); // the session is lost: the next calls race to open a new one
      const locks = await Promise.all(Array.from({ length: 10 }, (_, i) => p.acquire('exit-check/' + i)));
      await Promise.all(locks.map((l) => l.release()));
      await p.close();
      console.log('closed at ' + Math.round(performance.now()));`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', program], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
    });
    const exited = once(child, 'exit');
    const outcome = await Promise.race([
      exited.then(() => 'exited'),
      sleep(10_000).then(() => 'still running'),
    ]);
    if (outcome !== 'exited') child.kill('SIGKILL');
    const closedAt = Number(/closed at (\d+)/.exec(output)?.[1]);
    console.log(`after close(): ${outcome} (${output.trim()})`);
    expect(closedAt).toBeGreaterThan(0);
    expect(outcome).toBe('exited');
  }, 20_000);

  it('10,000 waiters that time out leave no watch registration behind', async () => {
    // Sessions that a busy event loop (thousands of waiters in this process) does not write off.
    const holder = open({ sessionTimeoutMs: 4_000, serverTickMs: 200 });
    const waiting = open({ sessionTimeoutMs: 4_000, serverTickMs: 200 });
    const key = uniqueKey('watch-bound');
    const held = await holder.acquire(key);
    let timedOut = 0;
    let granted = 0;
    // In batches: each waiter lists the folder, so a batch costs its size squared.
    for (let batch = 0; batch < 50; batch++) {
      const results = await Promise.allSettled(
        Array.from({ length: 200 }, () => waiting.acquire(key, { waitMs: 100 })),
      );
      for (const r of results) {
        if (r.status === 'rejected') {
          // Timed out; or, when the starved loop let the session go unconfirmed, unavailable.
          expect(['LOCK_TIMEOUT', 'BACKEND_UNAVAILABLE']).toContain((r.reason as { code?: string }).code);
          timedOut += 1;
        } else {
          // A starved event loop can leave the holder's session unconfirmed: its lock is then
          // given up (its signal aborts first) and a waiter is granted. Not this test's subject.
          granted += 1;
          await r.value.release();
        }
      }
    }
    expect(timedOut + granted).toBe(10_000);
    expect(timedOut).toBeGreaterThan(0); // waits did time out: the subject of this test
    expect(await waiting.watchCount()).toBe(0);
    // observe() loops that are stopped leave none either: on a provider of their own, whose session
    // the burst above cannot have written off (CI once saw 'client closed' in observe() here).
    const observer = open({ sessionTimeoutMs: 4_000, serverTickMs: 200 });
    const election = observer.election(uniqueKey('observe-bound'));
    const stops = Array.from({ length: 100 }, () => new AbortController());
    const seen = stops.map(async (stop) => {
      for await (const _ of election.observe({ signal: stop.signal })) stop.abort();
    });
    await Promise.all(seen);
    expect(await observer.watchCount()).toBe(0);
    await held.release().catch(() => undefined); // lost under starvation, see above
  }, 90_000);

  it('nothing listening on the port: BackendUnavailableError within min(callTimeoutMs, waitMs)', async () => {
    const closedPort = await new Promise<number>((ok) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as net.AddressInfo;
        s.close(() => ok(port));
      });
    });
    const provider = open({ connectString: `127.0.0.1:${closedPort}`, callTimeoutMs: 1_000 });
    const started = performance.now();
    const error = await provider.acquire('k', { waitMs: 2_000 }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    console.log(`unreachable: ${(error as Error).name} after ${Math.round(elapsed)} ms`);
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect(elapsed).toBeLessThan(2_500);
    // Issue 12's own case: the default callTimeoutMs (5 s) and a shorter wait.
    const defaults = open({ connectString: `127.0.0.1:${closedPort}` });
    const again = performance.now();
    const second = await defaults.acquire('k', { waitMs: 2_000 }).catch((e: unknown) => e);
    console.log(
      `unreachable, defaults: ${(second as Error).name} after ${Math.round(performance.now() - again)} ms`,
    );
    expect(second).toBeInstanceOf(BackendUnavailableError);
    expect(performance.now() - again).toBeLessThan(2_500);
  });
});

/** The session that owns the single node in folder (its ephemeralOwner), read with a client of our own. */
async function ownerOf(connectString: string, folder: string): Promise<bigint> {
  const client = await ZkClient.connect(
    { connectString, sessionTimeoutMs: 4_000, callTimeoutMs: 2_000 },
    { timeoutMs: 5_000 },
  );
  try {
    const [node] = await client.getChildren(folder);
    const stat = await client.exists(`${folder}/${node}`);
    return stat?.ephemeralOwner ?? 0n;
  } finally {
    await client.close();
  }
}

describe('ZooKeeper 3-node ensemble member faults', () => {
  let ensemble: ServerGroup;
  beforeAll(async () => {
    ensemble = await startServers('zookeeper', { size: 3, faults: true });
  }, 180_000); // the script, then the ensemble serving (each within 60 s; zk-quorum.ts)
  afterAll(() => ensemble?.stop());

  it(
    'a member paused past the session timeout, then resumed, each round another',
    async () => {
      const members = controls(ensemble);
      await faultRounds(endpoint(ensemble, 'ZK_CONNECT'), async (round) => {
        members.pause(round % 3);
        await sleep(PAUSE_MS);
        members.resume(round % 3);
      });
    },
    ROUND_BUDGET_MS,
  );

  it(
    'a member killed and restarted, each round another',
    async () => {
      const members = controls(ensemble);
      await faultRounds(endpoint(ensemble, 'ZK_CONNECT'), async (round) => {
        await members.kill(round % 3);
        await members.start(round % 3);
      });
    },
    ROUND_BUDGET_MS,
  );
});
