// etcd: fencekit against the etcd3 package's own lock() and against the raw floor, on one local etcd.
import { Etcd3 } from 'etcd3';
import { EtcdLockProvider } from 'fencekit/etcd';
import { startServer } from './servers.mjs';
import { measure, printTable } from './table.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function benchEtcd() {
  const server = await startServer('etcd.sh', ['1'], 'FENCEKIT_ETCD_ENDPOINTS');
  const endpoints = (server.vars.get('ETCD_ENDPOINTS') ?? server.vars.get('URL')).split(',');
  try {
    await uncontended(endpoints);
    await handoff(endpoints);
    await herd(endpoints);
    await memory(endpoints);
  } finally {
    await server.stop();
  }
}

async function uncontended(endpoints) {
  const provider = new EtcdLockProvider({ endpoints });
  const raw = new Etcd3({ hosts: endpoints });
  const lease = raw.lease(10);
  const leaseId = await lease.grant();
  const key = Buffer.from(`floor/${BigInt(leaseId).toString(16)}`);
  const rows = [
    {
      name: 'raw floor: create-if-absent txn + delete',
      ...(await measure(
        async () => {
          await raw.kv.txn({
            compare: [{ key, target: 1 /* Create */, result: 0 /* Equal */, create_revision: 0 }],
            success: [{ request_put: { key, value: Buffer.alloc(0), lease: leaseId } }],
            failure: [],
          });
          await raw.kv.deleteRange({ key });
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
    {
      name: 'etcd3 package lock().acquire() + release()',
      ...(await measure(
        async () => {
          const lock = raw.lock('bench/etcd3-lock');
          await lock.acquire();
          await lock.release();
        },
        { iterations: 300, warmup: 30 },
      )),
    },
  ];
  printTable('etcd, uncontended acquire + release (1 client, loopback)', rows);
  await lease.revoke();
  raw.close();
  await provider.close();
}

/** From the holder's release() call to the waiter (another client) holding. */
async function handoff(endpoints) {
  const a = new EtcdLockProvider({ endpoints });
  const b = new EtcdLockProvider({ endpoints });
  const samples = [];
  let holder = await a.acquire('bench/handoff');
  let [current, other] = [a, b];
  for (let i = 0; i < 300; i++) {
    const waiting = other.acquire('bench/handoff');
    while (((await current.inspect('bench/handoff'))?.waiters ?? 0) < 1) await sleep(0);
    await sleep(20); // let the waiter's watch be established: measure the handoff, not the queueing
    const start = process.hrtime.bigint();
    await holder.release();
    holder = await waiting;
    samples.push(Number(process.hrtime.bigint() - start) / 1_000);
    [current, other] = [other, current];
  }
  await holder.release();
  // Floor: a delete seen by another client's watch.
  const raw = new Etcd3({ hosts: endpoints });
  const watcherClient = new Etcd3({ hosts: endpoints });
  const floor = [];
  for (let i = 0; i < 300; i++) {
    const key = `bench/watch-floor/${i}`;
    await raw.put(key).value('x');
    const watcher = await watcherClient.watch().key(key).create();
    await sleep(20);
    const seen = new Promise((resolve) => watcher.once('delete', resolve));
    const start = process.hrtime.bigint();
    await raw.delete().key(key);
    await seen;
    floor.push(Number(process.hrtime.bigint() - start) / 1_000);
    await watcher.cancel();
  }
  const stats = (xs) => {
    xs.sort((x, y) => x - y);
    return { p50: xs[Math.floor(xs.length / 2)], p99: xs[Math.floor(xs.length * 0.99)] };
  };
  printTable('etcd, handoff: release() until another client holds', [
    { name: 'raw floor: delete until a watcher sees it', ...stats(floor) },
    { name: 'fencekit release → next waiter granted', ...stats(samples) },
  ]);
  raw.close();
  watcherClient.close();
  await Promise.all([a.close(), b.close()]);
}

/** Watch wake-ups per handoff with 1, 10 and 100 waiters (1.00 = no herd). */
async function herd(endpoints) {
  console.log('\netcd, wake-ups per handoff (each waiter a separate client)');
  console.log(
    `${'waiters'.padEnd(10)} ${'handoffs'.padStart(10)} ${'wake-ups'.padStart(10)} ${'per handoff'.padStart(12)}`,
  );
  for (const n of [1, 10, 100]) {
    const key = `bench/herd/${n}`;
    const holder = new EtcdLockProvider({ endpoints });
    const waiters = Array.from({ length: n }, () => new EtcdLockProvider({ endpoints }));
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

/** Heap used by one provider holding 10,000 locks. */
async function memory(endpoints) {
  const gc = globalThis.gc;
  if (!gc) {
    console.log('\n(memory: run with node --expose-gc to measure)');
    return;
  }
  const provider = new EtcdLockProvider({ endpoints });
  (await provider.acquire('bench/memory/warmup')).release();
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
    `\netcd, client heap for ${locks.length} held locks: ${((after - before) / 1024 / 1024).toFixed(1)} MB (target ≤ 30 MB)`,
  );
  await provider.close();
}
