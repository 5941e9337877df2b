// Semaphores: fencekit's on memory, Redis, etcd, PostgreSQL and ZooKeeper, beside redis-semaphore's
// Semaphore (which polls) on the same Redis and Curator's InterProcessSemaphoreV2 on the same
// ZooKeeper (bench/curator-semaphore, Debian's libcurator-recipes-java, when it is installed):
// uncontended acquire + release, then 20 contenders on one semaphore of limit 5 for 3 s each,
// releasing at once or after a 5 ms hold: permits handed over per second (grants to a client other
// than the one that released last: a client re-grabbing its own permit is no handover),
// acquisitions per second, the acquire wait p50 and the per-client spread.
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { MemoryLockProvider } from 'fencekit';
import { EtcdLockProvider } from 'fencekit/etcd';
import { PostgresLockProvider } from 'fencekit/postgres';
import { RedisLockProvider } from 'fencekit/redis';
import { ZooKeeperLockProvider } from 'fencekit/zookeeper';
import { Redis } from 'ioredis';
import { Semaphore } from 'redis-semaphore';
import { compileAgainstCurator, curatorMissing } from '../docker/native/curator-java.mjs';
import { startServer } from './servers.mjs';
import { measureSideBySide, printTable } from './table.mjs';

const LIMIT = envCount('FENCEKIT_BENCH_LIMIT', 5);
const CONTENDERS = envCount('FENCEKIT_BENCH_CONTENDERS', 20);
const SECONDS = 3;
/**
 * FENCEKIT_BENCH_CLIENTS: how many clients the contenders share (default 20, as the scale bench):
 * up to 20 contenders each have their own, as separate processes would; beyond, contender i uses
 * client i mod 20, so 200 contenders on PostgreSQL fit its 100 connections.
 */
const CLIENTS = envCount('FENCEKIT_BENCH_CLIENTS', 20);
/** FENCEKIT_BENCH_HOLDS: the contended rows' hold times, e.g. `0,5` (default) or `2-10` (uniform per hold). */
const HOLDS = (process.env.FENCEKIT_BENCH_HOLDS ?? '0,5').split(',').map((h) => h.trim());

function envCount(name, fallback) {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

/** One hold's length in ms: `5` is 5, `2-10` a uniform draw in [2, 10]. */
function holdOf(hold) {
  const [low, high] = hold.split('-').map(Number);
  return high === undefined ? low : low + Math.random() * (high - low);
}
const REDIS_SEMAPHORE = 'redis-semaphore Semaphore (retryInterval 10 ms)';

function fencekit(provider, name) {
  const s = provider.semaphore(name, { limit: LIMIT });
  return {
    acquire: async () => {
      const permit = await s.acquire({ ttlMs: 10_000 });
      return () => permit.release();
    },
    close: () => provider.close(),
  };
}

function redisSemaphore(url, name) {
  const client = new Redis(url);
  return {
    acquire: async () => {
      const s = new Semaphore(client, name, LIMIT, { lockTimeout: 10_000, acquireTimeout: 60_000 });
      await s.acquire();
      return () => s.release();
    },
    close: async () => client.disconnect(),
  };
}

/**
 * FENCEKIT_BENCH_ONLY=redis: only the rows on Redis (fencekit's and redis-semaphore's; the other
 * servers are not started); FENCEKIT_BENCH_ONLY=zookeeper: fencekit's ZooKeeper row and Curator's;
 * FENCEKIT_BENCH_ONLY=etcd: fencekit's etcd row. FENCEKIT_BENCH_LIMIT and FENCEKIT_BENCH_CONTENDERS
 * change the contended rows' limit (5) and contenders (20), FENCEKIT_BENCH_HOLDS their holds.
 * FENCEKIT_BENCH_ROUNDS=N: the contended rows N times, interleaved, with the Redis and ZooKeeper
 * ratios printed per round (on a loaded machine, ratios measured side by side are what count).
 */
export async function benchSemaphore() {
  const onlyRedis = process.env.FENCEKIT_BENCH_ONLY === 'redis';
  const onlyZk = process.env.FENCEKIT_BENCH_ONLY === 'zookeeper';
  const onlyEtcd = process.env.FENCEKIT_BENCH_ONLY === 'etcd';
  const rounds = Math.min(Math.max(Number(process.env.FENCEKIT_BENCH_ROUNDS ?? 1) || 1, 1), 20);
  const none = { vars: new Map(), stop: async () => {} };
  const redis = onlyZk || onlyEtcd ? none : await startServer('redis.sh', ['1'], 'FENCEKIT_REDIS_URL');
  const etcd = onlyRedis || onlyZk ? none : await startServer('etcd.sh', ['1'], 'FENCEKIT_ETCD_ENDPOINTS');
  const pg = onlyRedis || onlyZk || onlyEtcd ? none : await startServer('postgres.sh', [], 'FENCEKIT_PG_URL');
  const zk =
    onlyRedis || onlyEtcd ? none : await startServer('zookeeper.sh', ['1', '200'], 'FENCEKIT_ZK_CONNECT');
  const zkConnect = zk.vars.get('ZK_CONNECT') ?? zk.vars.get('URL');
  const redisUrl = redis.vars.get('REDIS_URL') ?? redis.vars.get('URL');
  const etcdEndpoints = (etcd.vars.get('ETCD_ENDPOINTS') ?? etcd.vars.get('URL') ?? '').split(',');
  const pgUrl = pg.vars.get('PG_URL') ?? pg.vars.get('URL');
  const run = `${Date.now()}`;
  const redisMakers = {
    'fencekit Redis': (name) => fencekit(new RedisLockProvider({ url: redisUrl }), name),
    [REDIS_SEMAPHORE]: (name) => redisSemaphore(redisUrl, name),
  };
  const zkMaker = (name) => fencekit(new ZooKeeperLockProvider({ connectString: zkConnect, root: '' }), name);
  const etcdMaker = (name) => fencekit(new EtcdLockProvider({ endpoints: etcdEndpoints }), name);
  const makers = onlyEtcd
    ? { 'fencekit etcd': etcdMaker }
    : onlyRedis
      ? redisMakers
      : onlyZk
        ? { 'fencekit ZooKeeper': zkMaker }
        : {
            'fencekit memory': (name) => fencekit(new MemoryLockProvider(), name),
            ...redisMakers,
            'fencekit etcd': etcdMaker,
            'fencekit PostgreSQL': (name) =>
              fencekit(new PostgresLockProvider({ connectionString: pgUrl, maxConnections: 4 }), name),
            'fencekit ZooKeeper': zkMaker,
          };
  try {
    const opened = [];
    const cases = {};
    for (const [label, make] of Object.entries(makers)) {
      const c = make(`bench/semaphore/${run}/uncontended/${label}`);
      opened.push(c);
      cases[label] = async () => (await c.acquire())();
    }
    printTable(
      'Semaphores, uncontended acquire + release (1 client, loopback)',
      await measureSideBySide(cases, { rounds: 3, iterations: 200, warmup: 50 }),
    );
    await Promise.all(opened.map((c) => c.close()));

    for (const holdMs of HOLDS) {
      const ratios = [];
      for (let round = 1; round <= rounds; round++) {
        const tag = rounds > 1 ? ` (round ${round} of ${rounds})` : '';
        ratios.push(
          await contended(
            makers,
            `${run}-${round}`,
            holdMs,
            onlyRedis || onlyEtcd ? undefined : zkConnect,
            tag,
          ),
        );
      }
      const shown = (key, digits) =>
        ratios
          .map((r) => r[key])
          .filter((r) => r !== undefined && Number.isFinite(r))
          .map((r) => `${r.toFixed(digits)}×`)
          .join(', ');
      if (rounds > 1 && !onlyZk) {
        console.log(
          `\nfencekit Redis / redis-semaphore handovers per second, hold ${holdMs} ms, per round: ${shown('redis', 1)}`,
        );
      }
      if (rounds > 1 && shown('zk', 2) !== '') {
        console.log(
          `fencekit ZooKeeper / Curator grants to another than the last releaser per second, hold ${holdMs} ms, per round: ${shown('zk', 2)}`,
        );
      }
    }
  } finally {
    await Promise.all([redis.stop(), etcd.stop(), pg.stop(), zk.stop()]);
  }
}

/** Curator's row (same contenders, limit, time and hold), or undefined without Java and Curator. */
async function curatorRow(connect, path, holdMs) {
  if (curatorMissing()) return undefined;
  const run = promisify(execFile);
  const compiled = await compileAgainstCurator(
    resolve(import.meta.dirname, 'curator-semaphore/CuratorSemaphoreBench.java'),
  );
  try {
    const args = [connect, path, LIMIT, CONTENDERS, SECONDS, holdMs].map(String);
    const { stdout } = await run('java', ['-cp', compiled.classpath, 'CuratorSemaphoreBench', ...args], {
      timeout: 120_000,
    });
    return JSON.parse(stdout.trim().split('\n').at(-1));
  } finally {
    await compiled.remove();
  }
}

/**
 * Counts handovers the same way for every client. Permits are alike, so "whose permit" is not
 * observable; what is: a grant to a client that released before is a re-grab when the semaphore
 * was never full between that release and this grant (the client took a permit that stayed free,
 * its own), and a handover when it was full meanwhile (the client got a permit another released).
 * A client's first grant is a handover once the semaphore has been full (before: a fresh permit). Releases count when
 * release() is called, so a grant the release makes itself comes after it. With limit 5, "the
 * last releaser" alone (the lock bench's rule, still printed) cannot tell: another holder's release
 * in between made most re-grabs look like handovers.
 */
class HandoverCount {
  handovers = 0;
  regrabs = 0;
  /** The old rule: grants to a client other than the last one that released. */
  toOtherThanLastReleaser = 0;
  #held = 0;
  /** The most grants held at once (as the clients see them). */
  maxHeld = 0;
  /** The most grants surely live at once: from the grant to the call of its release (a lower bound). */
  maxLive = 0;
  #live = 0;
  /** How many times the semaphore became full; per client, its value at the client's release. */
  #fullTimes = 0;
  #fullTimesAtRelease = new Array(CONTENDERS).fill(-1); // -1: not released yet
  #lastReleaser = -1;

  granted(client) {
    if (this.#lastReleaser !== client) this.toOtherThanLastReleaser += 1;
    const atRelease = this.#fullTimesAtRelease[client];
    if (atRelease === this.#fullTimes) this.regrabs += 1;
    else if (atRelease >= 0 || this.#fullTimes > 0) this.handovers += 1; // else: a permit never used
    this.#held += 1;
    this.maxHeld = Math.max(this.maxHeld, this.#held);
    this.#live += 1;
    this.maxLive = Math.max(this.maxLive, this.#live);
    // Above LIMIT for a moment when a release's own hand-over is heard before its reply.
    if (this.#held >= LIMIT) this.#fullTimes += 1;
  }

  /** Called before release(): the permit may be gone from here on. */
  releasing() {
    this.#live -= 1;
  }

  released(client) {
    this.#held -= 1;
    this.#fullTimesAtRelease[client] = this.#fullTimes;
    this.#lastReleaser = client;
  }
}

/** One contended row per maker (and Curator's); returns the Redis and ZooKeeper ratios (when measured). */
async function contended(makers, run, holdMs, zkConnect, tag = '') {
  const sharing = CONTENDERS > CLIENTS ? ` (sharing ${CLIENTS} clients)` : '';
  console.log(
    `\nSemaphores, ${CONTENDERS} contenders${sharing} on one semaphore of limit ${LIMIT} for ${SECONDS} s each, each holding ${holdMs} ms${tag}`,
  );
  console.log(
    `${'client'.padEnd(50)} ${'handovers/s'.padStart(12)} ${'re-grabs/s'.padStart(11)} ${'old rule/s'.padStart(11)} ${'acq/s'.padStart(7)} ${'wait p50 ms'.padStart(12)} ${'min..max per client'.padStart(20)} ${'most live at once'.padStart(17)} ${'ran s'.padStart(6)} ${'acq/s ran'.padStart(9)}`,
  );
  const results = new Map();
  const oldRule = new Map();
  for (const [label, make] of Object.entries(makers)) {
    const name = `bench/semaphore/${run}/contended-${holdMs}/${label}`;
    const clients = Array.from({ length: Math.min(CONTENDERS, CLIENTS) }, () => make(name));
    const waits = [];
    const counts = new Array(CONTENDERS).fill(0);
    const count = new HandoverCount();
    let granted = 0;
    const started = performance.now();
    const deadline = started + SECONDS * 1_000;
    await Promise.all(
      Array.from({ length: CONTENDERS }, async (_, index) => {
        const client = clients[index % clients.length];
        while (performance.now() < deadline) {
          const asked = performance.now();
          const release = await client.acquire();
          waits.push(performance.now() - asked);
          granted += 1;
          counts[index] += 1;
          count.granted(index);
          const hold = holdOf(holdMs);
          if (hold > 0) await new Promise((r) => setTimeout(r, hold));
          count.releasing();
          await release();
          count.released(index);
        }
      }),
    );
    // The last acquires asked before the deadline end after it: the run lasts longer than SECONDS.
    const ranSeconds = (performance.now() - started) / 1_000;
    waits.sort((a, b) => a - b);
    const perSecond = count.handovers / SECONDS;
    results.set(label, perSecond);
    oldRule.set(label, count.toOtherThanLastReleaser / SECONDS);
    console.log(
      `${label.padEnd(50)} ${perSecond.toFixed(0).padStart(12)} ${(count.regrabs / SECONDS).toFixed(0).padStart(11)} ${(count.toOtherThanLastReleaser / SECONDS).toFixed(0).padStart(11)} ${(granted / SECONDS).toFixed(0).padStart(7)} ${(waits[waits.length >> 1] ?? Number.NaN).toFixed(2).padStart(12)} ${`${Math.min(...counts)}..${Math.max(...counts)}`.padStart(20)} ${String(count.maxLive).padStart(17)} ${ranSeconds.toFixed(1).padStart(6)} ${(granted / ranSeconds).toFixed(0).padStart(9)}`,
    );
    if (count.maxHeld < LIMIT) {
      // Then every grant found a free permit: 0 handovers is right, the rate was bounded elsewhere.
      console.log(`  (${label}: never full, at most ${count.maxHeld} held at once: every grant a re-grab)`);
    }
    await Promise.all(clients.map((c) => c.close()));
  }
  const curator =
    zkConnect &&
    !holdMs.includes('-') &&
    (await curatorRow(zkConnect, `/bench/semaphore/${run}/curator-${holdMs}`, holdMs));
  let zkRatio;
  if (curator) {
    const label = 'Curator InterProcessSemaphoreV2 (Java)';
    console.log(
      `${label.padEnd(50)} ${'-'.padStart(12)} ${'-'.padStart(11)} ${(curator.handovers / SECONDS).toFixed(0).padStart(11)} ${(curator.acquisitions / SECONDS).toFixed(0).padStart(7)} ${curator.waitP50Ms.toFixed(2).padStart(12)} ${`${curator.min}..${curator.max}`.padStart(20)}`,
    );
    // The Java helper counts by the old rule (a grant to another client than the last releaser).
    zkRatio = oldRule.get('fencekit ZooKeeper') / (curator.handovers / SECONDS);
    console.log(
      `fencekit ZooKeeper: ${zkRatio.toFixed(2)}× Curator's grants to another than the last releaser per second (target: within 1.2×)`,
    );
  } else if (zkConnect) {
    console.log('(Curator not compared: apt-get install libcurator-recipes-java)');
  }
  if (!results.has('fencekit Redis')) return { zk: zkRatio };
  const ratio = results.get('fencekit Redis') / results.get(REDIS_SEMAPHORE);
  // The 5× target names no hold time; it is judged where a permit guards work (5 ms holds). With no
  // hold, redis-semaphore's releaser takes its own permit back in the same turn (re-grabs, no hop),
  // while every fencekit grant is a hand-over through Redis: shown, not judged.
  const target = holdOf(holdMs) > 0 ? 'target ≥ 5×' : 'no target with 0 ms holds: see docs/benchmarks.md';
  console.log(`fencekit Redis: ${ratio.toFixed(1)}× the handovers per second of redis-semaphore (${target})`);
  return { redis: ratio, zk: zkRatio };
}
