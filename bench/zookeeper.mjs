// ZooKeeper: fencekit against the raw floor (create + getChildren + delete) on one local server;
// handoff against the raw delete → watch latency; watch wake-ups per handoff; heap for 10,000 locks.
import { ZooKeeperLockProvider } from 'fencekit/zookeeper';
import zookeeper from 'node-zookeeper-client';
import { startServer } from './servers.mjs';
import { measure, printTable } from './table.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const call = (start) => new Promise((ok, fail) => start((error, value) => (error ? fail(error) : ok(value))));

async function rawClient(connectString) {
  const client = zookeeper.createClient(connectString, { sessionTimeout: 10_000 });
  await new Promise((ok) => {
    client.once('connected', ok);
    client.connect();
  });
  return client;
}

export async function benchZooKeeper() {
  const server = await startServer('zookeeper.sh', ['1', '200'], 'FENCEKIT_ZK_CONNECT');
  const connectString = server.vars.get('ZK_CONNECT') ?? server.vars.get('URL');
  try {
    await uncontended(connectString);
    await handoff(connectString);
    await herd(connectString);
    await memory(connectString);
  } finally {
    await server.stop();
  }
}

async function uncontended(connectString) {
  const raw = await rawClient(connectString);
  await call((cb) => raw.mkdirp('/bench/floor', cb));
  const provider = new ZooKeeperLockProvider({ connectString });
  const rows = [
    {
      name: 'raw floor: create + getChildren + delete',
      ...(await measure(
        async () => {
          const path = await call((cb) =>
            raw.create('/bench/floor/n-', Buffer.alloc(0), zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, cb),
          );
          await call((cb) => raw.getChildren('/bench/floor', cb));
          await call((cb) => raw.remove(path, -1, cb));
        },
        { iterations: 1_000 },
      )),
    },
    {
      name: 'fencekit acquire + release',
      ...(await measure(
        async () => {
          const lock = await provider.acquire('bench/uncontended');
          await lock.release();
        },
        { iterations: 1_000 },
      )),
    },
  ];
  printTable('ZooKeeper, uncontended acquire + release (1 client, loopback)', rows);
  raw.close();
  await provider.close();
}

const stats = (xs) => {
  xs.sort((x, y) => x - y);
  return { p50: xs[xs.length >> 1], p99: xs[Math.floor(xs.length * 0.99)] };
};

async function handoff(connectString) {
  const a = new ZooKeeperLockProvider({ connectString });
  const b = new ZooKeeperLockProvider({ connectString });
  const samples = [];
  let holder = await a.acquire('bench/handoff');
  let [current, other] = [a, b];
  for (let i = 0; i < 300; i++) {
    const waiting = other.acquire('bench/handoff');
    while (((await current.inspect('bench/handoff'))?.waiters ?? 0) < 1) await sleep(0);
    await sleep(20);
    const start = process.hrtime.bigint();
    await holder.release();
    holder = await waiting;
    samples.push(Number(process.hrtime.bigint() - start) / 1_000);
    [current, other] = [other, current];
  }
  await holder.release();
  const raw = await rawClient(connectString);
  const watcher = await rawClient(connectString);
  const floor = [];
  for (let i = 0; i < 300; i++) {
    const path = await call((cb) => raw.create(`/bench/watch-${i}`, cb));
    const seen = new Promise((resolve) => watcher.exists(path, resolve, () => undefined));
    await sleep(20);
    const start = process.hrtime.bigint();
    await call((cb) => raw.remove(path, -1, cb));
    await seen;
    floor.push(Number(process.hrtime.bigint() - start) / 1_000);
  }
  printTable('ZooKeeper, handoff: release() until another client holds', [
    { name: 'raw floor: delete until a watcher sees it', ...stats(floor) },
    { name: 'fencekit release → next waiter granted', ...stats(samples) },
  ]);
  raw.close();
  watcher.close();
  await Promise.all([a.close(), b.close()]);
}

async function herd(connectString) {
  console.log('\nZooKeeper, watch wake-ups per handoff (each waiter a separate session)');
  console.log(
    `${'waiters'.padEnd(10)} ${'handoffs'.padStart(10)} ${'wake-ups'.padStart(10)} ${'per handoff'.padStart(12)}`,
  );
  for (const n of [1, 10, 100]) {
    const key = `bench/herd/${n}`;
    const holder = new ZooKeeperLockProvider({ connectString });
    const waiters = Array.from({ length: n }, () => new ZooKeeperLockProvider({ connectString }));
    let lock = await holder.acquire(key);
    const granted = [];
    const all = waiters.map((w) => w.acquire(key).then((l) => granted.push(l)));
    while (((await holder.inspect(key))?.waiters ?? 0) < n) await sleep(5);
    await lock.release();
    for (let i = 0; i < n; i++) {
      while (granted.length <= i) await sleep(0);
      lock = granted[i];
      await lock.release();
    }
    await Promise.all(all);
    const wakeups = waiters.reduce((sum, w) => sum + w.wakeups, 0);
    console.log(
      `${String(n).padEnd(10)} ${String(n).padStart(10)} ${String(wakeups).padStart(10)} ${(wakeups / n).toFixed(2).padStart(12)}`,
    );
    await Promise.all([holder, ...waiters].map((p) => p.close()));
  }
}

async function memory(connectString) {
  const gc = globalThis.gc;
  if (!gc) return;
  const provider = new ZooKeeperLockProvider({ connectString });
  await (await provider.acquire('bench/memory/warmup')).release();
  gc();
  const before = process.memoryUsage().heapUsed;
  const locks = [];
  for (let i = 0; i < 10_000; i += 100) {
    locks.push(
      ...(await Promise.all(
        Array.from({ length: 100 }, (_, j) => provider.acquire(`bench/memory/${i + j}`)),
      )),
    );
  }
  gc();
  const after = process.memoryUsage().heapUsed;
  console.log(
    `\nZooKeeper, client heap for ${locks.length} held locks: ${((after - before) / 1024 / 1024).toFixed(1)} MB`,
  );
  await provider.close();
}
