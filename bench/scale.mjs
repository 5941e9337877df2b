// Contention at scale: 10, 100 and 1,000 contenders on one name, each acquiring and releasing at
// once for a few seconds, on every backend beside the Redis anchors (redlock v5 and
// redis-semaphore's Mutex on the same Redis): handoffs per second (grants to a contender other than
// the last holder), the p99 wait, and the acquires that failed. The contenders share a few clients
// (CLIENTS at most), as the processes of a fleet would. Beside fencekit's ZooKeeper row, Curator's
// InterProcessMutex (Debian's libcurator-recipes-java, when installed) at up to CURATOR_MAX
// contenders, one client and thread each (its harness counts grants, not waits: no p99), measured
// against fencekit's ZooKeeper lock in the same shape in interleaved rounds. After the Redis rows,
// the Redis ceiling (bench/redis-ceiling.mjs): what a token ring through Redis reaches, with each
// Redis row's share of it and each anchor's rate times 10 beside it.
//
// FENCEKIT_BENCH_CONTENDERS=10,100  other contender counts; FENCEKIT_BENCH_SECONDS=3  the shortest window;
// FENCEKIT_BENCH_ONLY=redis,etcd    only those rows; FENCEKIT_BENCH_ROUNDS=3  rounds against Curator. With --chart (npm run bench scale -- --chart),
// writes docs/benchmarks/scale-handoffs.svg and scale-p99.svg (bench/chart.mjs).
import { setMaxListeners } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { connect } from 'fencekit';
import { Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock5';
import { lineChart } from './chart.mjs';
import { curatorMissing, startCurator } from './curator.mjs';
import { redisRingCeiling } from './redis-ceiling.mjs';
import { contendGrants } from './scenarios.mjs';
import { startServer } from './servers.mjs';

const CLIENTS = 20;
/** Curator's harness opens a ZooKeeper session and a thread per contender: 1,000 would measure the JVM. */
const CURATOR_MAX = 100;
const counts = (process.env.FENCEKIT_BENCH_CONTENDERS ?? '10,100,1000').split(',').map(Number);
const seconds = Number(process.env.FENCEKIT_BENCH_SECONDS ?? 3);
const only = process.env.FENCEKIT_BENCH_ONLY?.split(',');
/** How long the contenders still waiting at the window's end may take to stop. */
const DRAIN_MS = 30_000;
/** The window goes on until every contender was granted this often (a p99 of whole turns)… */
const ROUNDS = 3;
/** …but not past this. */
const MAX_WINDOW_S = 30;

/** A fencekit client: acquire(name, signal) resolves with its release. */
async function fencekitClient(url) {
  const provider = await connect(url, { callTimeoutMs: 10_000 });
  return {
    acquire: async (name, signal) => {
      const lock = await provider.acquire(name, { signal, ttlMs: 10_000 });
      return () => lock.release();
    },
    close: () => provider.close(),
  };
}

/** The anchors cannot be cancelled: they give up on their own within their retry budget. */
function redlockClient(url) {
  const redis = new Redis(url);
  const redlock = new Redlock([redis], { retryCount: 200, retryDelay: 10, retryJitter: 10 });
  return {
    acquire: async (name) => {
      const lock = await redlock.acquire([name], 10_000);
      return () => lock.release();
    },
    close: async () => redis.disconnect(),
  };
}

function redisSemaphoreClient(url) {
  const redis = new Redis(url);
  return {
    acquire: async (name) => {
      const mutex = new Mutex(redis, name, { lockTimeout: 10_000, acquireTimeout: 5_000, retryInterval: 10 });
      await mutex.acquire();
      return () => mutex.release();
    },
    close: async () => redis.disconnect(),
  };
}

/**
 * N contenders on one name: handoffs/s, p99 wait (ms) and failed acquires. The window lasts at
 * least `seconds`, and on until every contender has been granted ROUNDS times (at most
 * MAX_WINDOW_S): at 1,000 contenders one turn of the queue takes longer than a short window, and a
 * wait the window cut off says nothing about the queue. The p99 is over whole waits after each
 * contender's first grant (the first includes the clients' start).
 */
async function contend(open, contenders, name) {
  const clients = await Promise.all(Array.from({ length: Math.min(CLIENTS, contenders) }, () => open()));
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // every waiting contender listens to it
  const waits = [];
  const grants = new Array(contenders).fill(0);
  let last = -1;
  let handoffs = 0;
  let failures = 0;
  let grantedAll = () => undefined;
  const everyoneServed = new Promise((resolve) => {
    grantedAll = resolve;
  });
  let served = 0;
  const loop = async (id) => {
    const client = clients[id % clients.length];
    while (!stop.signal.aborted) {
      const asked = performance.now();
      let release;
      try {
        release = await client.acquire(name, stop.signal);
      } catch {
        if (!stop.signal.aborted) failures++;
        continue;
      }
      if (stop.signal.aborted) {
        await release().catch(() => undefined);
        break;
      }
      if (grants[id] > 0) waits.push(performance.now() - asked);
      if (++grants[id] === ROUNDS && ++served === contenders) grantedAll();
      if (last !== id) handoffs++;
      last = id;
      await release().catch(() => failures++);
    }
  };
  const started = performance.now();
  const running = Promise.all(Array.from({ length: contenders }, (_, id) => loop(id)));
  await new Promise((r) => setTimeout(r, seconds * 1_000));
  let timer;
  await Promise.race([everyoneServed, new Promise((r) => (timer = setTimeout(r, MAX_WINDOW_S * 1_000)))]);
  clearTimeout(timer);
  stop.abort(new Error('the window ended'));
  const windowS = (performance.now() - started) / 1_000;
  const drained = await Promise.race([
    running.then(() => true),
    new Promise((r) => setTimeout(() => r(false), DRAIN_MS)),
  ]);
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  waits.sort((a, b) => a - b);
  const p99 = waits.length ? waits[Math.min(waits.length - 1, Math.floor(waits.length * 0.99))] : Number.NaN;
  const fifoMs = (contenders / (handoffs / windowS)) * 1_000;
  return { handoffsPerSecond: handoffs / windowS, p99Ms: p99, fifoMs, failures, drained, windowS, served };
}

export async function benchScale() {
  const chart = process.argv.includes('--chart');
  const want = (name) => !only || only.includes(name);
  const servers = {};
  const start = async (name, script, args) => {
    if (want(name)) servers[name] = await startServer(script, args);
  };
  try {
    await start('etcd', 'etcd.sh', ['1']);
    await start('zookeeper', 'zookeeper.sh', ['1']);
    await start('redis', 'redis.sh', ['1']);
    await start('postgres', 'postgres.sh', []);
    const redisUrl = servers.redis?.vars.get('REDIS_URL');
    const rows = {
      'fencekit etcd':
        servers.etcd &&
        (() => fencekitClient(`etcd://${servers.etcd.vars.get('ETCD_ENDPOINTS').replace('http://', '')}`)),
      'fencekit ZooKeeper':
        servers.zookeeper && (() => fencekitClient(`zk://${servers.zookeeper.vars.get('ZK_CONNECT')}`)),
      'fencekit Redis': redisUrl && (() => fencekitClient(redisUrl)),
      'fencekit PostgreSQL': servers.postgres && (() => fencekitClient(servers.postgres.vars.get('PG_URL'))),
      'redlock v5 (anchor)': redisUrl && (async () => redlockClient(redisUrl)),
      'redis-semaphore Mutex (anchor)': redisUrl && (async () => redisSemaphoreClient(redisUrl)),
    };
    const results = [];
    console.log(
      `\nContention at scale: N contenders on one name, acquire and release at once, at least ${seconds} s each and until every contender was granted ${ROUNDS} times (at most ${MAX_WINDOW_S} s); FIFO ms = N ÷ handoffs/s`,
    );
    console.log(
      `${'case'.padEnd(34)} ${'N'.padStart(6)} ${'handoffs/s'.padStart(11)} ${'p99 wait ms'.padStart(12)} ${'FIFO ms'.padStart(8)} ${'window s'.padStart(9)} ${'failed'.padStart(7)} ${'× at 10'.padStart(8)}`,
    );
    const curator =
      servers.zookeeper && !curatorMissing()
        ? await startCurator(servers.zookeeper.vars.get('ZK_CONNECT'))
        : undefined;
    if (curator) rows['Curator InterProcessMutex (anchor)'] = 'curator';
    for (const [name, open] of Object.entries(rows)) {
      if (!open) continue;
      if (open === 'curator') {
        try {
          const zkUrl = `zk://${servers.zookeeper.vars.get('ZK_CONNECT')}`;
          results.push(
            ...(await againstCurator(
              zkUrl,
              curator,
              counts.filter((c) => c <= CURATOR_MAX),
            )),
          );
        } finally {
          await curator.close();
        }
        continue;
      }
      let first;
      for (const n of counts) {
        const r = await contend(open, n, `bench/scale/${n}/${results.length}`);
        first ??= r.handoffsPerSecond;
        results.push({ name, contenders: n, ...r });
        console.log(
          `${name.padEnd(34)} ${String(n).padStart(6)} ${r.handoffsPerSecond.toFixed(0).padStart(11)} ${r.p99Ms.toFixed(1).padStart(12)} ${r.fifoMs.toFixed(0).padStart(8)} ${r.windowS.toFixed(1).padStart(9)} ${String(r.failures).padStart(7)} ${(r.handoffsPerSecond / first).toFixed(2).padStart(8)}${r.served < n ? ` (${n - r.served} not granted ${ROUNDS}×)` : ''}${r.drained ? '' : ' (not drained)'}`,
        );
      }
    }
    if (redisUrl) results.push(...(await printRedisCeiling(redisUrl, results)));
    if (chart) await writeCharts(results);
    return results;
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
  }
}

/**
 * The ring's rate (bench/redis-ceiling.mjs) over CLIENTS connections, taken twice, beside what each
 * Redis row reached and each anchor's rate times 10: where 10× an anchor is above the ring's
 * best, no client handing over by a message through Redis reaches it on this machine. Returns the
 * ring's best as a row per contender count, for the chart.
 */
async function printRedisCeiling(redisUrl, results) {
  const rings = [];
  for (let i = 0; i < 2; i++) rings.push(await redisRingCeiling(redisUrl, CLIENTS, seconds * 1_000));
  const best = Math.max(...rings);
  console.log(
    `\nRedis ceiling: a token round ${CLIENTS} connections, 1 PUBLISH per hand-over, no lock: ${rings.map((r) => r.toFixed(0)).join(' and ')} hand-overs/s`,
  );
  for (const r of results.filter((x) => x.name.includes('Redis') || x.name.includes('(anchor)'))) {
    if (r.name.includes('Curator')) continue;
    const share = `${((100 * r.handoffsPerSecond) / best).toFixed(0)} % of the ceiling`;
    const tenfold = r.name.includes('(anchor)')
      ? `; 10× it is ${(10 * r.handoffsPerSecond).toFixed(0)}${10 * r.handoffsPerSecond > best ? ', above the ceiling' : ''}`
      : '';
    console.log(`${r.name.padEnd(34)} ${String(r.contenders).padStart(6)}  ${share}${tenfold}`);
  }
  // For the chart: the ring's best, as a line across the contender counts (it has no p99).
  return counts.map((contenders) => ({
    name: 'Redis ceiling (token ring, no lock)',
    contenders,
    handoffsPerSecond: best,
    p99Ms: Number.NaN,
  }));
}

/**
 * fencekit's ZooKeeper lock and Curator's InterProcessMutex in the same shape (a session per
 * contender, every grant counted, as Curator's harness counts), in interleaved rounds: one row
 * after the other drifts with the machine, by as much as the gap between the two.
 */
async function againstCurator(zkUrl, curator, contenderCounts) {
  // An odd count, so that the median is a round's own ratio.
  const asked = Math.min(Math.max(Number(process.env.FENCEKIT_BENCH_ROUNDS ?? 3) || 3, 1), 19);
  const rounds = asked % 2 === 1 ? asked : asked + 1;
  const ms = seconds * 1_000;
  const perSecond = (grants) => grants.reduce((a, b) => a + Math.max(b, 0), 0) / seconds;
  const rows = [];
  console.log(
    `\nZooKeeper against Curator, a session per contender, ${rounds} interleaved rounds of ${seconds} s: grants/s, fencekit ÷ Curator`,
  );
  for (const n of contenderCounts) {
    const ratios = [];
    const mine = [];
    const theirs = [];
    for (let round = 0; round < rounds; round++) {
      const open = () => connect(zkUrl, { callTimeoutMs: 10_000 });
      const runOurs = async () =>
        perSecond(await contendGrants(open, `bench/scale/curator-${n}/${round}`, n, ms));
      const runTheirs = async () => (await curator.send(`contend ${n} ${ms}`)).grants;
      // Who goes first alternates: a round's second run finds the server and the JIT warmer.
      let ours;
      let grants;
      if (round % 2 === 0) {
        ours = await runOurs();
        grants = await runTheirs();
      } else {
        grants = await runTheirs();
        ours = await runOurs();
      }
      if (grants.some((g) => g < 0))
        console.log(`  Curator: ${grants.filter((g) => g < 0).length} contenders failed`);
      mine.push(ours);
      theirs.push(perSecond(grants));
      ratios.push(ours / theirs.at(-1));
      console.log(
        `${String(n).padStart(6)} contenders, round ${round + 1}: fencekit ${ours.toFixed(0)}, Curator ${theirs.at(-1).toFixed(0)}, ${ratios.at(-1).toFixed(2)}×`,
      );
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(
      `${String(n).padStart(6)} contenders: median ${median(ratios).toFixed(2)}× Curator (target ≥ 1.00×)`,
    );
    // On the chart beside fencekit's ZooKeeper in the same shape: the scale row shares 20 clients.
    rows.push(
      {
        name: 'Curator InterProcessMutex (anchor)',
        contenders: n,
        handoffsPerSecond: median(theirs),
        p99Ms: Number.NaN,
      },
      {
        name: 'fencekit ZooKeeper, a session each',
        contenders: n,
        handoffsPerSecond: median(mine),
        p99Ms: Number.NaN,
      },
    );
  }
  return rows;
}

async function writeCharts(results) {
  const series = [...new Set(results.map((r) => r.name))].map((name) => ({
    name,
    points: results.filter((r) => r.name === name).map((r) => [r.contenders, r.handoffsPerSecond, r.p99Ms]),
  }));
  const dir = resolve(import.meta.dirname, '../docs/benchmarks');
  await mkdir(dir, { recursive: true });
  const when = new Date().toISOString().slice(0, 10);
  await writeFile(
    resolve(dir, 'scale-handoffs.svg'),
    lineChart({
      title: `Handoffs per second vs contenders on one name (${when})`,
      xLabel: 'contenders',
      yLabel: 'handoffs/s',
      series: series.map((s) => ({ name: s.name, points: s.points.map(([x, y]) => [x, y]) })),
    }),
  );
  await writeFile(
    resolve(dir, 'scale-p99.svg'),
    lineChart({
      title: `p99 wait vs contenders on one name (${when})`,
      xLabel: 'contenders',
      yLabel: 'p99 wait, ms',
      series: series.map((s) => ({ name: s.name, points: s.points.map(([x, , p99]) => [x, p99]) })),
    }),
  );
  console.log(`charts written to ${dir}`);
}
