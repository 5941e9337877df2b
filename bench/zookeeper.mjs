// ZooKeeper: fencekit against the raw floor (create + getChildren + delete) on one local server;
// handoff against the raw delete → watch latency; watch wake-ups per handoff; heap for 10,000 locks.
import { ZooKeeperLockProvider } from 'fencekit/zookeeper';
import zookeeper from 'node-zookeeper-client';
import { handoffSamples, printHeapForLocks, printHerd, stats } from './scenarios.mjs';
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
    await printHerd('ZooKeeper', async () => new ZooKeeperLockProvider({ connectString, serverTickMs: 200 }));
    await printHeapForLocks(
      'ZooKeeper',
      async () => new ZooKeeperLockProvider({ connectString, serverTickMs: 200 }),
    );
  } finally {
    await server.stop();
  }
}

async function uncontended(connectString) {
  const raw = await rawClient(connectString);
  await call((cb) => raw.mkdirp('/bench/floor', cb));
  const provider = new ZooKeeperLockProvider({ connectString, serverTickMs: 200 });
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

async function handoff(connectString) {
  const samples = await handoffSamples(
    async () => new ZooKeeperLockProvider({ connectString, serverTickMs: 200 }),
    'bench/handoff',
  );
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
}
