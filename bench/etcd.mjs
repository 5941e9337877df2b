// etcd: fencekit against the etcd3 package's own lock() and against the raw floor, on one local etcd.
import { Etcd3 } from 'etcd3';
import { EtcdLockProvider } from 'fencekit/etcd';
import { countEtcdCalls } from './etcd-call-count.mjs';
import { handoffSamples, printHeapForLocks, printHerd, stats } from './scenarios.mjs';
import { startServer } from './servers.mjs';
import { measureSideBySide, printTable } from './table.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function benchEtcd() {
  const server = await startServer('etcd.sh', ['1'], 'FENCEKIT_ETCD_ENDPOINTS');
  const endpoints = (server.vars.get('ETCD_ENDPOINTS') ?? server.vars.get('URL')).split(',');
  try {
    await uncontended(endpoints);
    await handoff(endpoints);
    await printHerd('etcd', async () => new EtcdLockProvider({ endpoints }));
    await printHeapForLocks('etcd', async () => new EtcdLockProvider({ endpoints }));
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
  const headRange = {
    key: Buffer.from('floor/'),
    range_end: Buffer.from('floor0'),
    sort_target: 2 /* Create */,
    sort_order: 1 /* Ascend */,
    limit: 1,
    keys_only: true,
  };
  const marker = Buffer.from('floor-lock-delay/marker');
  const ownerRecord = () =>
    JSON.stringify({ fencekit: 1, owner: undefined, since: new Date().toISOString() });
  const rows = await measureSideBySide(
    {
      'raw floor: create-if-absent txn + delete': async () => {
        await raw.kv.txn({
          compare: [{ key, target: 1 /* Create */, result: 0 /* Equal */, create_revision: 0 }],
          success: [{ request_put: { key, value: Buffer.alloc(0), lease: leaseId } }],
          failure: [],
        });
        await raw.kv.deleteRange({ key });
      },
      'raw floor, each call with a deadline as fencekit': async () => {
        const deadline = () => ({ deadline: new Date(Date.now() + 5_000) });
        await raw.kv.txn(
          {
            compare: [{ key, target: 1 /* Create */, result: 0 /* Equal */, create_revision: 0 }],
            success: [{ request_put: { key, value: Buffer.alloc(0), lease: leaseId } }],
            failure: [],
          },
          deadline(),
        );
        await raw.kv.deleteRange({ key }, deadline());
      },
      // What fencekit sends, without fencekit: the enqueue Txn also reads the queue's head (to know
      // whether we hold) and the name's lock-delay marker, with the owner record as the value; the
      // release deletes only the key of that create revision. The rest of fencekit's row is its own
      // code between the calls.
      "fencekit's two calls, raw": async () => {
        const deadline = () => ({ deadline: new Date(Date.now() + 5_000) });
        const put = await raw.kv.txn(
          {
            compare: [{ key, target: 1 /* Create */, result: 0 /* Equal */, create_revision: 0 }],
            success: [
              { request_put: { key, value: Buffer.from(ownerRecord()), lease: leaseId } },
              { request_range: headRange },
              { request_range: { key: marker } },
            ],
            failure: [
              { request_range: { key } },
              { request_range: headRange },
              { request_range: { key: marker } },
            ],
          },
          deadline(),
        );
        const created = put.responses[0].response_put.header.revision;
        await raw.kv.txn(
          {
            compare: [{ key, target: 1 /* Create */, result: 0 /* Equal */, create_revision: created }],
            success: [{ request_delete_range: { key } }],
            failure: [],
          },
          deadline(),
        );
      },
      'fencekit acquire + release': async () => {
        const lock = await provider.acquire('bench/uncontended');
        await lock.release();
      },
      'etcd3 package lock().acquire() + release()': async () => {
        const lock = raw.lock('bench/etcd3-lock');
        await lock.acquire();
        await lock.release();
      },
    },
    { rounds: 5, iterations: 150, warmup: 30 },
  );
  printTable('etcd, uncontended acquire + release (1 client, loopback)', rows);
  await printCallsPerGrant(provider);
  await lease.revoke();
  raw.close();
  await provider.close();
}

/** Calls to etcd per uncontended acquire + release, counted after the timed runs (the floor: 2). */
async function printCallsPerGrant(provider) {
  const counter = countEtcdCalls(provider.client);
  const grants = 50;
  for (let i = 0; i < grants; i++) await (await provider.acquire('bench/uncontended')).release();
  const { calls, watches } = counter.take();
  const perGrant = Object.entries(calls).map(([method, n]) => `${method} ${n / grants}`);
  console.log(
    `fencekit calls per acquire + release: ${perGrant.join(', ')}; watches ${watches / grants} (floor: 2 calls)`,
  );
}

/** From the holder's release() call to the waiter (another client) holding, against the watch floor. */
async function handoff(endpoints) {
  const samples = await handoffSamples(async () => new EtcdLockProvider({ endpoints }), 'bench/handoff');
  // Floor: a delete seen by another client's watch; and the target, that watch event followed by
  // one read round trip of the watching client (measured the same way, in the same conditions).
  const raw = new Etcd3({ hosts: endpoints });
  const watcherClient = new Etcd3({ hosts: endpoints });
  const floor = [];
  const floorPlusRead = [];
  for (let i = 0; i < 300; i++) {
    const key = `bench/watch-floor/${i}`;
    await raw.put(key).value('x');
    const watcher = await watcherClient.watch().key(key).create();
    await sleep(20);
    const withRead = i % 2 === 1;
    const seen = new Promise((resolve) =>
      watcher.once('delete', () => resolve(withRead ? watcherClient.get(key) : undefined)),
    );
    const start = process.hrtime.bigint();
    await raw.delete().key(key);
    await seen;
    (withRead ? floorPlusRead : floor).push(Number(process.hrtime.bigint() - start) / 1_000);
    await watcher.cancel();
  }
  printTable('etcd, handoff: release() until another client holds', [
    { name: 'raw floor: delete until a watcher sees it', ...stats(floor) },
    { name: 'target: that, then one read by the watcher', ...stats(floorPlusRead) },
    { name: 'fencekit release → next waiter granted', ...stats(samples) },
  ]);
  raw.close();
  watcherClient.close();
}
