// Issue #18: do the facades keep within 10 % of fencekit's native API with 10 contenders on Redis?
// One run of each is at the mercy of a shared machine (runs varied by more than 10 %), so the cases
// take turns in short rounds (native, redlock, Mutex; then the other way round; …) and each round's
// facade figure is divided by the native one of that same round: a slow moment of the machine falls
// on both sides of a ratio. Reported: every round's ratio, their median and spread, and what load
// hardly moves: this process's CPU time and the server's per hand-over, and the commands per
// hand-over (INFO commandstats). Last, the CPU the API layer itself adds per acquire + release,
// measured over the in-memory provider (no I/O to wait for), set against a Redis hand-over's CPU.
import os from 'node:os';
import { MemoryLockProvider, MemoryLockServer } from 'fencekit';
import { Mutex } from 'fencekit/compat/redis-semaphore';
import { Redlock } from 'fencekit/compat/redlock';
import { RedisLockProvider } from 'fencekit/redis';
import { Redis } from 'ioredis';

const CONTENDERS = 10;
const ROUND_MS = 1_000;
const ROUNDS = Math.max(8, Number(process.env.FENCEKIT_BENCH_ROUNDS ?? 8));

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
    const redlock = new Redlock([new Redis(url)], { retryCount: 300, retryDelay: 200 });
    return {
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
    if (name !== 'info') commands[name] = Number(calls);
  const cpu = (field) => Number(text.match(new RegExp(`^${field}:([\\d.]+)`, 'm'))?.[1] ?? Number.NaN);
  return { commands, cpuSeconds: cpu('used_cpu_user') + cpu('used_cpu_sys') };
}

/** The clients of one case contend on one key for ROUND_MS (no hold: release at once). */
async function round(clients, key, probe, durationMs = ROUND_MS) {
  const counts = new Array(clients.length).fill(0);
  let handoffs = 0;
  let last = -1;
  const before = await serverStats(probe);
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const deadline = start + durationMs;
  await Promise.all(
    clients.map(async (client, index) => {
      while (performance.now() < deadline) {
        const release = await client.acquire(key);
        counts[index] += 1;
        if (last !== -1 && last !== index) handoffs += 1;
        last = index;
        await release();
      }
    }),
  );
  const seconds = (performance.now() - start) / 1_000;
  const cpu = process.cpuUsage(cpuBefore);
  const after = await serverStats(probe);
  let commands = 0;
  for (const [name, calls] of Object.entries(after.commands))
    commands += calls - (before.commands[name] ?? 0);
  const evalsha = (after.commands.evalsha ?? 0) - (before.commands.evalsha ?? 0);
  return {
    perSecond: handoffs / seconds,
    clientCpuUs: (cpu.user + cpu.system) / handoffs,
    serverCpuUs: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / handoffs,
    commands: commands / handoffs,
    evalsha: evalsha / handoffs,
    minMax: `${Math.min(...counts)}..${Math.max(...counts)}`,
  };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const pad = (value, width) => String(value).padStart(width);
/** A case's name in the per-round table's header. */
const short = (name) =>
  name.replace(/^compat\/(redis-semaphore )?/, '').replace(/ \(A\/A control\)$/, ' (A/A)');

export async function benchFacadeOverhead(url) {
  const names = Object.keys(cases);
  const [native, ...facades] = names;
  const clients = Object.fromEntries(
    names.map((name) => [name, Array.from({ length: CONTENDERS }, () => cases[name](url))]),
  );
  const probe = new Redis(url);
  const results = Object.fromEntries(names.map((name) => [name, []]));
  const load = os.loadavg();
  try {
    // Warm-up: connections, scripts, notice subscriptions, JIT.
    for (const name of names) await round(clients[name], `bench:facade:${name}`, probe, 300);
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? names : [...names].reverse();
      for (const name of order) results[name].push(await round(clients[name], `bench:facade:${name}`, probe));
    }
  } finally {
    await Promise.all(Object.values(clients).flatMap((list) => list.map((c) => c.close())));
    probe.disconnect();
  }
  const loadAfter = os.loadavg();

  console.log(
    `\nRedis, facade overhead: ${CONTENDERS} contenders, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms per case` +
      ` (${new Date().toISOString()}, load average ${load.map((l) => l.toFixed(2)).join(' ')} →` +
      ` ${loadAfter.map((l) => l.toFixed(2)).join(' ')}, ${os.cpus().length} CPUs)`,
  );
  console.log(
    `${'round'.padEnd(6)} ${pad(`${native} h/s`, 12)} ${facades.map((f) => `${pad(`${short(f)} h/s`, 12)} ${pad('× native', 9)}`).join(' ')}`,
  );
  for (let r = 0; r < ROUNDS; r++) {
    const base = results[native][r].perSecond;
    const cells = facades.map((f) => {
      const value = results[f][r].perSecond;
      return `${pad(value.toFixed(0), 12)} ${pad((value / base).toFixed(3), 9)}`;
    });
    console.log(`${String(r + 1).padEnd(6)} ${pad(base.toFixed(0), 12)} ${cells.join(' ')}`);
  }

  console.log(
    `\n${'case'.padEnd(30)} ${pad('handoffs/s', 10)} ${pad('× native: median', 16)} ${pad('min..max', 13)}` +
      ` ${pad('client CPU µs/h', 15)} ${pad('× native', 8)} ${pad('Redis CPU µs/h', 14)} ${pad('EVALSHA/h', 9)} ${pad('cmds/h', 7)}`,
  );
  const verdicts = [];
  const cpuBase = median(results[native].map((x) => x.clientCpuUs));
  const layer = await layerCost();
  for (const name of names) {
    const rows = results[name];
    const ratios = rows.map((x, r) => x.perSecond / results[native][r].perSecond);
    const cpuRatios = rows.map((x, r) => x.clientCpuUs / results[native][r].clientCpuUs);
    const clientCpu = median(rows.map((x) => x.clientCpuUs));
    console.log(
      `${name.padEnd(30)} ${pad(median(rows.map((x) => x.perSecond)).toFixed(0), 10)}` +
        ` ${pad(median(ratios).toFixed(3), 16)} ${pad(`${Math.min(...ratios).toFixed(2)}..${Math.max(...ratios).toFixed(2)}`, 13)}` +
        ` ${pad(clientCpu.toFixed(0), 15)} ${pad(median(cpuRatios).toFixed(3), 8)}` +
        ` ${pad(median(rows.map((x) => x.serverCpuUs)).toFixed(0), 14)}` +
        ` ${pad(median(rows.map((x) => x.evalsha)).toFixed(2), 9)} ${pad(median(rows.map((x) => x.commands)).toFixed(1), 7)}`,
    );
    if (name !== native) {
      const total = (list) => list.reduce((sum, x) => sum + x.perSecond, 0);
      const added = layer[name] - layer[native];
      verdicts.push(
        `${name}: handoffs/s median ${percent(median(ratios))} vs native (all rounds together` +
          ` ${percent(total(rows) / total(results[native]))}), client CPU per hand-over ${percent(median(cpuRatios))}` +
          ` (native ${cpuBase.toFixed(0)} µs); the API layer adds ${added.toFixed(1)} µs CPU per acquire + release` +
          ` = ${((100 * added) / cpuBase).toFixed(1)} % of a native hand-over's CPU.` +
          (name === CONTROL
            ? ' The same code: its distance from 1 is the noise of this run.'
            : ` Throughput ${median(ratios) >= 0.9 ? 'within' : 'NOT within'} 10 % by the median.`),
      );
    }
  }
  console.log(
    `\nAPI layer over the in-memory provider (uncontended acquire + release, ${LAYER_ROUNDS} interleaved rounds of ${LAYER_OPS}): client CPU µs per op`,
  );
  for (const name of names) console.log(`${name.padEnd(30)} ${pad(layer[name].toFixed(1), 8)}`);
  for (const line of verdicts) console.log(line);
}

const percent = (ratio) => `${ratio >= 1 ? '+' : ''}${(100 * (ratio - 1)).toFixed(1)} %`;

const LAYER_ROUNDS = 10;
const LAYER_OPS = 2_000;

/** Median CPU µs per uncontended acquire + release of each case over one in-memory provider. */
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
    for (let r = 0; r < LAYER_ROUNDS; r++) {
      for (const [name, op] of Object.entries(ops)) {
        const before = process.cpuUsage();
        for (let i = 0; i < LAYER_OPS; i++) await op();
        const cpu = process.cpuUsage(before);
        samples[name].push((cpu.user + cpu.system) / LAYER_OPS);
      }
    }
  } finally {
    await provider.close();
  }
  return Object.fromEntries(Object.entries(samples).map(([name, list]) => [name, median(list)]));
}
