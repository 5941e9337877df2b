// Do the facades keep within 10 % of fencekit's native API with 10 contenders on Redis?
// Wall-clock on a shared machine swings by far more than 10 %, so the design keeps every bias off
// the comparison and says how much noise is left:
// - rounds: each case once per round, the order rotating through a Williams square (every case in
//   every position, and after every other case, equally often), so neither a position in the round
//   nor the case run just before favours one case (a forward/reverse alternation puts two cases
//   always at the ends of a round, and an even count's median then keeps that position's bias);
// - every run is fresh: new clients, connections and key, gc() before it, and the first LEAD_MS
//   (connections, subscriptions, the first queue) left out of the timed window, so no case carries
//   state or GC debt from its earlier runs (instances warmed first ran slower, see docs/benchmarks.md);
// - per round, each case's figure is divided by the native run of that same round; reported: the
//   median ratio with its IQR and a bootstrap 95 % interval, and the same for the native case run
//   again under another name (A/A control): its interval is the noise floor of this run.
// The verdict says "within 10 %" only if a facade's interval and the A/A control's both lie within
// 0.90..1.10. Beside it, what load hardly moves: commands and client CPU per hand-over, and the CPU
// the API layer itself adds per acquire + release over the in-memory provider.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { MemoryLockProvider } from 'fencekit';
import { Mutex } from 'fencekit/compat/redis-semaphore';
import { Redlock } from 'fencekit/compat/redlock';
import { RedisLockProvider } from 'fencekit/redis';
import { MemoryLockServer } from 'fencekit/testing';
import { Redis } from 'ioredis';
import { seeded } from './seeded.mjs';

const CONTENDERS = 10;
/** Timed window of one run, after LEAD_MS untimed. */
// 16 rounds × 4 cases × (150 + 1,000 ms + set-up) ≈ 80 s: `npm run bench facade` stays near 2 min.
const ROUND_MS = Number(process.env.FENCEKIT_BENCH_ROUND_MS ?? 1_000);
const LEAD_MS = 150;
/** Rounds: a multiple of 4, so that the Williams square is used whole. */
const ROUNDS = Math.ceil(Math.max(4, Number(process.env.FENCEKIT_BENCH_ROUNDS ?? 16)) / 4) * 4;
/** 4 cases: each row is one round's order; each case takes each position once and follows each other case once. */
const WILLIAMS = [
  [0, 1, 3, 2],
  [1, 2, 0, 3],
  [2, 3, 1, 0],
  [3, 0, 2, 1],
];
const BOOTSTRAP = 4_000;
const BOUND = 0.1;

/**
 * Each case: CONTENDERS clients of { acquire(key) → release function, close() }. Every case asks the
 * same: a 5 s lease, waiting at most 60 s (redlock's window is retryCount × retryDelay).
 */
const cases = {
  // Over an ioredis client of its own, as the facades below are: only the API layer differs.
  native: (url) => {
    const client = new Redis(url);
    const provider = new RedisLockProvider({ client });
    return {
      client,
      acquire: async (key) => {
        const lock = await provider.acquire(key, { ttlMs: 5_000, waitMs: 60_000 });
        return () => lock.release();
      },
      close: async () => {
        await provider.close();
        client.disconnect();
      },
    };
  },
  'compat/redlock': (url) => {
    const client = new Redis(url);
    const redlock = new Redlock([client], { retryCount: 300, retryDelay: 200 });
    return {
      client,
      acquire: async (key) => {
        const lock = await redlock.acquire([key], 5_000);
        return () => lock.release();
      },
      close: () => redlock.quit(),
    };
  },
  // A Mutex per use, as redis-semaphore apps write it.
  'compat/redis-semaphore Mutex': (url) => {
    const client = new Redis(url);
    return {
      client,
      acquire: async (key) => {
        const mutex = new Mutex(client, key, { lockTimeout: 5_000, acquireTimeout: 60_000 });
        await mutex.acquire();
        return () => mutex.release();
      },
      close: async () => client.disconnect(),
    };
  },
};
// The native case once more under another name: what its ratio strays from 1.000 is the noise the
// machine adds to the others' (an A/A control).
const CONTROL = 'native again (A/A control)';
cases[CONTROL] = cases.native;

/** The server's command counts and CPU seconds, read by a client that is not measured. */
async function serverStats(probe) {
  const text = await probe.info('all');
  const commands = {};
  for (const [, name, calls] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (name !== 'info' && name !== 'ping') commands[name] = Number(calls);
  const cpu = (field) => Number(text.match(new RegExp(`^${field}:([\\d.]+)`, 'm'))?.[1] ?? Number.NaN);
  return { commands, cpuSeconds: cpu('used_cpu_user') + cpu('used_cpu_sys') };
}

/**
 * One run: fresh clients of a case contend on a fresh key (no hold: release at once). Handoffs/s
 * counts the hand-overs between LEAD_MS and LEAD_MS + durationMs; CPU and commands are per
 * hand-over of the whole run.
 */
async function run(makeClient, url, key, probe, durationMs = ROUND_MS) {
  const clients = Array.from({ length: CONTENDERS }, () => makeClient(url));
  try {
    await Promise.all(clients.map((c) => c.client.ping())); // connected before anything is counted
    globalThis.gc?.(); // the garbage of earlier runs is not this one's to collect (npm run bench exposes gc)
    const counts = new Array(clients.length).fill(0);
    let handoffs = 0;
    let timed = 0;
    let last = -1;
    const before = await serverStats(probe);
    const cpuBefore = process.cpuUsage();
    const from = performance.now() + LEAD_MS;
    const deadline = from + durationMs;
    await Promise.all(
      clients.map(async (client, index) => {
        while (performance.now() < deadline) {
          const release = await client.acquire(key);
          const now = performance.now();
          counts[index] += 1;
          if (last !== -1 && last !== index) {
            handoffs += 1;
            if (now >= from && now < deadline) timed += 1;
          }
          last = index;
          await release();
        }
      }),
    );
    const cpu = process.cpuUsage(cpuBefore);
    const after = await serverStats(probe);
    let commands = 0;
    for (const [name, calls] of Object.entries(after.commands))
      commands += calls - (before.commands[name] ?? 0);
    const evalsha = (after.commands.evalsha ?? 0) - (before.commands.evalsha ?? 0);
    return {
      perSecond: timed / (durationMs / 1_000),
      clientCpuUs: (cpu.user + cpu.system) / handoffs,
      serverCpuUs: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / handoffs,
      commands: commands / handoffs,
      evalsha: evalsha / handoffs,
    };
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

/** Median; for an even count, the geometric mean of the middle two (ratios are compared in log). */
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : Math.sqrt(sorted[mid - 1] * sorted[mid]);
};
/** The q-quantile (linear interpolation) of values. */
const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  const at = q * (sorted.length - 1);
  const low = Math.floor(at);
  return sorted[low] + (sorted[Math.min(low + 1, sorted.length - 1)] - sorted[low]) * (at - low);
};
/** Percentile-bootstrap 95 % interval of the median of ratios (resampling rounds). */
function bootstrapMedian(ratios) {
  const random = seeded(18);
  const medians = [];
  for (let b = 0; b < BOOTSTRAP; b++)
    medians.push(median(Array.from(ratios, () => ratios[Math.floor(random() * ratios.length)])));
  return [quantile(medians, 0.025), quantile(medians, 0.975)];
}
/** Median, IQR and bootstrap interval of per-round paired ratios. */
function summarize(ratios) {
  const [low, high] = bootstrapMedian(ratios);
  return { median: median(ratios), q1: quantile(ratios, 0.25), q3: quantile(ratios, 0.75), low, high };
}
const inside = (s) => s.low >= 1 - BOUND && s.high <= 1 + BOUND;
const interval = (s) => `[${s.low.toFixed(3)}, ${s.high.toFixed(3)}]`;
const pad = (value, width) => String(value).padStart(width);
/** A case's name in the per-round table's header. */
const short = (name) =>
  name.replace(/^compat\/(redis-semaphore )?/, '').replace(/ \(A\/A control\)$/, ' (A/A)');

export async function benchFacadeOverhead(url) {
  const names = Object.keys(cases);
  const [native, ...others] = names;
  const probe = new Redis(url);
  const results = Object.fromEntries(names.map((name) => [name, []]));
  /** Per position in the round: each run's handoffs/s ÷ its round's geometric mean. */
  const byPosition = names.map(() => []);
  const load = os.loadavg();
  const started = performance.now();
  let runs = 0;
  try {
    // Warm-up, thrown away: JIT, script cache, and each case's code paths once.
    for (const name of names) await run(cases[name], url, `bench:facade:warm:${runs++}`, probe, 300);
    for (let r = 0; r < ROUNDS; r++) {
      const row = [];
      for (const index of WILLIAMS[r % WILLIAMS.length]) {
        const result = await run(cases[names[index]], url, `bench:facade:${runs++}`, probe);
        results[names[index]][r] = result;
        row.push(result.perSecond);
      }
      const mean = Math.exp(row.reduce((sum, x) => sum + Math.log(x), 0) / row.length);
      for (const [position, x] of row.entries()) byPosition[position].push(x / mean);
    }
  } finally {
    probe.disconnect();
  }
  const elapsed = (performance.now() - started) / 1_000;
  // Every run's figures, for a look at what the medians hide (FENCEKIT_BENCH_JSON=file).
  if (process.env.FENCEKIT_BENCH_JSON)
    writeFileSync(process.env.FENCEKIT_BENCH_JSON, JSON.stringify({ orders: WILLIAMS, results }, null, 1));
  const loadAfter = os.loadavg();

  console.log(
    `\nRedis, facade overhead: ${CONTENDERS} contenders, ${ROUNDS} rounds (Williams-square order) of` +
      ` ${LEAD_MS} + ${ROUND_MS} ms timed per case, fresh clients and key per run, ${elapsed.toFixed(0)} s` +
      ` (${new Date().toISOString()}, load average ${load.map((l) => l.toFixed(2)).join(' ')} →` +
      ` ${loadAfter.map((l) => l.toFixed(2)).join(' ')}, ${os.cpus().length} CPUs)`,
  );
  console.log(
    `${'round'.padEnd(6)} ${'order'.padEnd(6)} ${pad(`${native} h/s`, 12)} ${others.map((f) => `${pad(`${short(f)} h/s`, 12)} ${pad('× native', 9)}`).join(' ')}`,
  );
  for (let r = 0; r < ROUNDS; r++) {
    const base = results[native][r].perSecond;
    const cells = others.map((f) => {
      const value = results[f][r].perSecond;
      return `${pad(value.toFixed(0), 12)} ${pad((value / base).toFixed(3), 9)}`;
    });
    const order = WILLIAMS[r % WILLIAMS.length].map((i) => 'NRMA'[i]).join('');
    console.log(
      `${String(r + 1).padEnd(6)} ${order.padEnd(6)} ${pad(base.toFixed(0), 12)} ${cells.join(' ')}`,
    );
  }
  console.log(
    `(order: N native, R redlock, M Mutex, A A/A control) handoffs/s ÷ its round's geometric mean, median by position 1..4:` +
      ` ${byPosition.map((list) => median(list).toFixed(3)).join(' ')}`,
  );

  console.log(
    `\n${'case'.padEnd(30)} ${pad('handoffs/s', 10)} ${pad('× native: median', 16)} ${pad('IQR', 13)} ${pad('95 % (bootstrap)', 16)}` +
      ` ${pad('client CPU µs/h', 15)} ${pad('× native', 8)} ${pad('Redis CPU µs/h', 14)} ${pad('EVALSHA/h', 9)} ${pad('cmds/h', 7)}`,
  );
  const layer = await layerCost();
  const cpuBase = median(results[native].map((x) => x.clientCpuUs));
  const summaries = {};
  for (const name of names) {
    const rows = results[name];
    const throughput = summarize(rows.map((x, r) => x.perSecond / results[native][r].perSecond));
    const cpu = summarize(rows.map((x, r) => x.clientCpuUs / results[native][r].clientCpuUs));
    summaries[name] = { throughput, cpu };
    const ratioCells =
      name === native
        ? `${pad('1.000', 16)} ${pad('', 13)} ${pad('', 16)}`
        : `${pad(throughput.median.toFixed(3), 16)} ${pad(`${throughput.q1.toFixed(2)}..${throughput.q3.toFixed(2)}`, 13)} ${pad(interval(throughput), 16)}`;
    console.log(
      `${name.padEnd(30)} ${pad(median(rows.map((x) => x.perSecond)).toFixed(0), 10)} ${ratioCells}` +
        ` ${pad(median(rows.map((x) => x.clientCpuUs)).toFixed(0), 15)} ${pad(cpu.median.toFixed(3), 8)}` +
        ` ${pad(median(rows.map((x) => x.serverCpuUs)).toFixed(0), 14)}` +
        ` ${pad(median(rows.map((x) => x.evalsha)).toFixed(2), 9)} ${pad(median(rows.map((x) => x.commands)).toFixed(1), 7)}`,
    );
  }
  console.log(
    `\nAPI layer over the in-memory provider (uncontended acquire + release, ${LAYER_ROUNDS} rounds in Williams-square order of ${LAYER_OPS}): client CPU µs per op`,
  );
  for (const name of names)
    console.log(
      `${name.padEnd(30)} ${pad(layer[name].median.toFixed(1), 8)}` +
        (name === native
          ? ''
          : `  ${pad(layer[name].added.toFixed(1), 5)} vs native (median of per-round differences)`),
    );

  const control = summaries[CONTROL].throughput;
  console.log(
    `\nNoise floor: the A/A control (the native code again) has median ×${control.median.toFixed(3)},` +
      ` IQR ${control.q1.toFixed(2)}..${control.q3.toFixed(2)}, 95 % interval ${interval(control)}` +
      ` (${inside(control) ? 'within' : 'NOT within'} ${1 - BOUND}..${1 + BOUND}: this run ${inside(control) ? 'can' : 'cannot'} resolve 10 %).`,
  );
  for (const name of others.filter((n) => n !== CONTROL)) {
    const { throughput, cpu } = summaries[name];
    const { added } = layer[name];
    const verdict =
      inside(throughput) && inside(control)
        ? 'within 10 %'
        : throughput.high < 1 - BOUND && inside(control)
          ? 'NOT within 10 % (slower)'
          : throughput.low > 1 + BOUND && inside(control)
            ? 'NOT within 10 % (faster)'
            : 'not established';
    console.log(
      `${name}: handoffs/s ×${throughput.median.toFixed(3)} of native (95 % ${interval(throughput)}), client CPU per` +
        ` hand-over ×${cpu.median.toFixed(3)} (95 % ${interval(cpu)}; native ${cpuBase.toFixed(0)} µs),` +
        ` commands per hand-over ${median(results[name].map((x) => x.commands)).toFixed(2)} vs native` +
        ` ${median(results[native].map((x) => x.commands)).toFixed(2)}; the API layer adds ${added.toFixed(1)} µs CPU per` +
        ` acquire + release (A/A: ${layer[CONTROL].added.toFixed(1)} µs) = ${((100 * added) / cpuBase).toFixed(1)} % of a native` +
        ` hand-over's CPU. Verdict: ${verdict}.`,
    );
  }
}

const LAYER_ROUNDS = 20;
const LAYER_OPS = 2_000;

/** CPU µs per uncontended acquire + release of each case over one in-memory provider. */
async function layerCost() {
  const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
  const redlock = new Redlock(provider, { retryCount: 300, retryDelay: 200 });
  const ops = {
    native: async () => (await provider.acquire('layer:native', { ttlMs: 5_000, waitMs: 60_000 })).release(),
    'compat/redlock': async () => (await redlock.acquire(['layer:redlock'], 5_000)).release(),
    'compat/redis-semaphore Mutex': async () => {
      const mutex = new Mutex(provider, 'layer:mutex', { lockTimeout: 5_000, acquireTimeout: 60_000 });
      await mutex.acquire();
      await mutex.release();
    },
    [CONTROL]: async () =>
      (await provider.acquire('layer:control', { ttlMs: 5_000, waitMs: 60_000 })).release(),
  };
  const samples = Object.fromEntries(Object.keys(ops).map((name) => [name, []]));
  try {
    for (const op of Object.values(ops)) for (let i = 0; i < LAYER_OPS; i++) await op(); // warm-up
    const entries = Object.entries(ops);
    for (let r = 0; r < LAYER_ROUNDS; r++) {
      for (const [name, op] of WILLIAMS[r % WILLIAMS.length].map((i) => entries[i])) {
        const before = process.cpuUsage();
        for (let i = 0; i < LAYER_OPS; i++) await op();
        const cpu = process.cpuUsage(before);
        samples[name].push((cpu.user + cpu.system) / LAYER_OPS);
      }
    }
  } finally {
    await provider.close();
  }
  // Per case: the median, and the median of its per-round differences to native (paired, as above).
  return Object.fromEntries(
    Object.entries(samples).map(([name, list]) => {
      const diffs = list.map((x, r) => x - samples.native[r]).sort((a, b) => a - b);
      return [name, { median: median(list), added: quantile(diffs, 0.5) }];
    }),
  );
}
