// ZooKeeper: fencekit against Apache Curator's InterProcessMutex (bench/curator.mjs) and the raw
// floor (create + getChildren + delete) on one local server, in interleaved rounds: uncontended,
// handoff, handoffs/s and fairness with 10 contenders; watch wake-ups per handoff; heap for 10,000 locks.
import { ZooKeeperLockProvider } from 'fencekit/zookeeper';
import zookeeper from 'node-zookeeper-client';
import { curatorMissing, startCurator } from './curator.mjs';
import { contendGrants, handoffSamples, printHeapForLocks, printHerd, stats } from './scenarios.mjs';
import { startServer } from './servers.mjs';
import { printContention, printTable } from './table.mjs';
import { startWireCounter } from './wire-count.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const call = (start) => new Promise((ok, fail) => start((error, value) => (error ? fail(error) : ok(value))));
const ROUNDS = 5;

async function rawClient(connectString) {
  const client = zookeeper.createClient(connectString, { sessionTimeout: 10_000 });
  await new Promise((ok) => {
    client.once('connected', ok);
    client.connect();
  });
  return client;
}

/** Curator's harness, or a stand-in that yields no rows (with the reason printed once). */
async function curatorOrNone(connectString) {
  const missing = curatorMissing();
  if (!missing) return startCurator(connectString);
  console.log(`
(Curator rows skipped: ${missing})`);
  return undefined;
}

export async function benchZooKeeper() {
  const server = await startServer('zookeeper.sh', ['1', '200'], 'FENCEKIT_ZK_CONNECT');
  const connectString = server.vars.get('ZK_CONNECT') ?? server.vars.get('URL');
  const curator = await curatorOrNone(connectString);
  const open = async () => new ZooKeeperLockProvider({ connectString, serverTickMs: 200 });
  try {
    await wireCounts(connectString);
    await uncontended(connectString, curator);
    await handoff(connectString, curator);
    await contention(curator, open);
    await printHerd('ZooKeeper', open);
    await printHeapForLocks('ZooKeeper', open);
  } finally {
    await curator?.close();
    await server.stop();
  }
}

/** Latencies (µs) of `iterations` sequential runs of fn. */
async function timed(fn, iterations) {
  const samples = [];
  for (let i = 0; i < iterations; i++) {
    const start = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - start) / 1_000);
  }
  return samples;
}

async function uncontended(connectString, curator) {
  const raw = await rawClient(connectString);
  await call((cb) => raw.mkdirp('/bench/floor', cb));
  const provider = new ZooKeeperLockProvider({ connectString, serverTickMs: 200 });
  const cases = {
    'raw floor: create + getChildren + delete': async (n) =>
      timed(async () => {
        const path = await call((cb) =>
          raw.create('/bench/floor/n-', Buffer.alloc(0), zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, cb),
        );
        await call((cb) => raw.getChildren('/bench/floor', cb));
        await call((cb) => raw.remove(path, -1, cb));
      }, n),
    'fencekit acquire + release': async (n) =>
      timed(async () => {
        const lock = await provider.acquire('bench/uncontended');
        await lock.release();
      }, n),
  };
  if (curator) {
    cases['Curator InterProcessMutex acquire + release'] = async (n) =>
      (await curator.send(`uncontended ${n}`)).samples;
  }
  // Client CPU per call: this process's for the Node cases, the JVM's for Curator.
  const cpu = Object.fromEntries(Object.keys(cases).map((name) => [name, { micros: 0, calls: 0 }]));
  for (const [name, run] of Object.entries(cases)) {
    const clock = name.startsWith('Curator')
      ? () => curator.cpuMicros()
      : async () => {
          const { user, system } = process.cpuUsage();
          return user + system;
        };
    cases[name] = async (n) => {
      const before = await clock();
      const samples = await run(n);
      cpu[name].micros += (await clock()) - before;
      cpu[name].calls += n;
      return samples;
    };
  }
  const rows = await interleaved(cases, 300, 200);
  printTable(
    `ZooKeeper, uncontended acquire + release (1 client, loopback, ${ROUNDS} interleaved rounds)`,
    rows,
  );
  console.log(`${'client CPU per call, warm-up included'.padEnd(48)} ${'µs'.padStart(10)}`);
  for (const [name, { micros, calls }] of Object.entries(cpu)) {
    console.log(`${name.padEnd(48)} ${(micros / calls).toFixed(0).padStart(10)}`);
  }
  raw.close();
  await provider.close();
}

/** Runs each case for `iterations` per round, the cases in turn, after `warmup` each; p50/p99 over all rounds. */
async function interleaved(cases, iterations, warmup) {
  const entries = Object.entries(cases);
  for (const [, run] of entries) await run(warmup);
  const samples = entries.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [index, [, run]] of entries.entries()) samples[index].push(...(await run(iterations)));
  }
  return entries.map(([name], index) => ({ name, ...stats(samples[index]) }));
}

async function handoff(connectString, curator) {
  const cases = {
    'raw floor: delete until a watcher sees it': (n) => watchFloor(connectString, n),
    'fencekit release → next waiter granted': (n) =>
      handoffSamples(
        async () => new ZooKeeperLockProvider({ connectString, serverTickMs: 200 }),
        'bench/handoff',
        n,
      ),
  };
  if (curator) {
    cases['Curator release → next waiter granted'] = async (n) =>
      (await curator.send(`handoff ${n}`)).samples;
  }
  const rows = await interleaved(cases, 60, 5);
  printTable('ZooKeeper, handoff: release() until another client holds', rows);
}

async function watchFloor(connectString, n) {
  const raw = await rawClient(connectString);
  const watcher = await rawClient(connectString);
  const floor = [];
  for (let i = 0; i < n; i++) {
    const path = await call((cb) => raw.create(`/bench/watch-${crypto.randomUUID()}`, cb));
    const seen = new Promise((resolve) => watcher.exists(path, resolve, () => undefined));
    await sleep(20);
    const start = process.hrtime.bigint();
    await call((cb) => raw.remove(path, -1, cb));
    await seen;
    floor.push(Number(process.hrtime.bigint() - start) / 1_000);
  }
  raw.close();
  watcher.close();
  return floor;
}

/** 10 contenders (a client each) loop acquire + release: handoffs/s and how evenly they were shared. */
async function contention(curator, open) {
  const clients = 10;
  const ms = 2_000;
  const rounds = 3;
  const sum = (into, counts) => {
    for (const [i, c] of counts.entries()) into[i] = (into[i] ?? 0) + c;
  };
  const fencekit = [];
  const theirs = [];
  for (let round = 0; round < rounds; round++) {
    sum(fencekit, await contendGrants(open, `bench/contend/${round}`, clients, ms));
    if (curator) sum(theirs, (await curator.send(`contend ${clients} ${ms}`)).grants);
  }
  const seconds = (rounds * ms) / 1_000;
  const rows = [{ name: 'fencekit, 10 contenders', grants: fencekit, seconds }];
  if (curator) rows.push({ name: 'Curator InterProcessMutex, 10 contenders', grants: theirs, seconds });
  printContention(`ZooKeeper, handoffs/s and fairness (${rounds} interleaved rounds of ${ms} ms)`, rows);
}

/** Requests and round trips per uncontended acquire + release, as counted on the wire. */
async function wireCounts(connectString) {
  const grants = 200;
  const proxy = await startWireCounter(connectString);
  const rows = [];
  try {
    const provider = new ZooKeeperLockProvider({ connectString: proxy.connectString, serverTickMs: 200 });
    await (await provider.acquire('bench/wire')).release();
    proxy.take();
    for (let i = 0; i < grants; i++) await (await provider.acquire('bench/wire')).release();
    rows.push({ name: 'fencekit', ...proxy.take() });
    await provider.close();
    if (!curatorMissing()) {
      const curator = await startCurator(proxy.connectString);
      await curator.send('uncontended 1');
      proxy.take();
      await curator.send(`uncontended ${grants}`);
      rows.push({ name: 'Curator InterProcessMutex', ...proxy.take() });
      await curator.close();
    }
  } finally {
    await proxy.close();
  }
  console.log(
    `\nZooKeeper, on the wire per uncontended acquire + release (${grants} grants, pings left out)`,
  );
  console.log(
    `${'client'.padEnd(28)} ${'requests'.padStart(9)} ${'round trips'.padStart(12)}  requests by op`,
  );
  for (const { name, requests, roundTrips } of rows) {
    const total = Object.values(requests).reduce((a, b) => a + b, 0);
    const ops = Object.entries(requests)
      .map(([op, n]) => `${op} ${(n / grants).toFixed(2)}`)
      .join(', ');
    console.log(
      `${name.padEnd(28)} ${(total / grants).toFixed(2).padStart(9)} ${(roundTrips / grants).toFixed(2).padStart(12)}  ${ops}`,
    );
  }
}
