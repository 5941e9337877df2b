// Tenant isolation: the per-tenant limiter (limit 2 per tenant, one provider with its default
// options, as one worker process) on memory, Redis, PostgreSQL, etcd and ZooKeeper. Tenant B runs
// JOBS jobs of JOB_MS one after another, first alone, then while tenant A keeps a backlog of
// BACKLOG waiting jobs (each of A's jobs that ends is replaced at once). Printed per backend: B's
// p50 and p99 (acquire + job + release) in both cases, their ratio and the verdict against the
// target "B's p99 under A's backlog within 5× its unloaded p99". FENCEKIT_BENCH_ONLY=postgres (or
// memory, redis, etcd, zookeeper, comma-separated): those rows only.
import { createTenantLimiter, MemoryLockProvider } from 'fencekit';
import { EtcdLockProvider } from 'fencekit/etcd';
import { PostgresLockProvider } from 'fencekit/postgres';
import { RedisLockProvider } from 'fencekit/redis';
import { ZooKeeperLockProvider } from 'fencekit/zookeeper';
import { startServer } from './servers.mjs';

const LIMIT = 2;
const BACKLOG = 200;
const JOBS = 100;
const JOB_MS = 10;
const TARGET = 5;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** B's job latencies in ms, one job after another. */
async function timeJobs(limiter, tenant) {
  const samples = [];
  for (let i = 0; i < JOBS; i++) {
    const start = performance.now();
    await limiter.run(tenant, () => sleep(JOB_MS), { waitMs: 60_000 });
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  const at = (q) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
  return { p50: at(0.5), p99: at(0.99) };
}

/** Keeps BACKLOG jobs of `tenant` outstanding until stop() is called; resolves once all ended. */
function flood(limiter, tenant) {
  let stopped = false;
  const lane = async () => {
    while (!stopped)
      await limiter.run(tenant, () => sleep(JOB_MS), { waitMs: 600_000 }).catch(() => undefined);
  };
  const lanes = Array.from({ length: BACKLOG }, lane);
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(lanes);
    },
  };
}

async function row(label, provider) {
  const limiter = createTenantLimiter(provider, { limit: LIMIT, prefix: `bench/tenants/${Date.now()}/` });
  try {
    await timeJobs(limiter, 'warm-up');
    const alone = await timeJobs(limiter, 'B');
    const backlogA = flood(limiter, 'A');
    await sleep(500); // A's backlog is queued
    const loaded = await timeJobs(limiter, 'B');
    await backlogA.stop();
    const ratio = loaded.p99 / alone.p99;
    const verdict = ratio <= TARGET ? 'met' : 'NOT met';
    console.log(
      `${label.padEnd(12)} ${alone.p50.toFixed(1).padStart(9)} ${alone.p99.toFixed(1).padStart(9)} ${loaded.p50.toFixed(1).padStart(11)} ${loaded.p99.toFixed(1).padStart(11)} ${`${ratio.toFixed(2)}×`.padStart(8)}  ${verdict}`,
    );
  } finally {
    await provider.close();
  }
}

export async function benchTenantIsolation() {
  const only = process.env.FENCEKIT_BENCH_ONLY?.split(',');
  const wanted = (backend) => !only || only.includes(backend);
  const none = { vars: new Map(), stop: async () => {} };
  const redis = wanted('redis') ? await startServer('redis.sh', ['1'], 'FENCEKIT_REDIS_URL') : none;
  const etcd = wanted('etcd') ? await startServer('etcd.sh', ['1'], 'FENCEKIT_ETCD_ENDPOINTS') : none;
  const pg = wanted('postgres') ? await startServer('postgres.sh', [], 'FENCEKIT_PG_URL') : none;
  const zk = wanted('zookeeper')
    ? await startServer('zookeeper.sh', ['1', '200'], 'FENCEKIT_ZK_CONNECT')
    : none;
  try {
    console.log(
      `\nTenant isolation: B's ${JOBS} jobs of ${JOB_MS} ms one after another, alone and under A's backlog of ${BACKLOG} (limit ${LIMIT} per tenant, one provider, default options); target: B's p99 within ${TARGET}× its unloaded p99`,
    );
    console.log(
      `${'backend'.padEnd(12)} ${'alone p50'.padStart(9)} ${'p99 ms'.padStart(9)} ${'backlog p50'.padStart(11)} ${'p99 ms'.padStart(11)} ${'p99 ×'.padStart(8)}  verdict`,
    );
    if (wanted('memory')) await row('memory', new MemoryLockProvider());
    if (wanted('redis')) {
      await row(
        'Redis',
        new RedisLockProvider({ url: redis.vars.get('REDIS_URL') ?? redis.vars.get('URL') }),
      );
    }
    if (wanted('postgres')) {
      const connectionString = pg.vars.get('PG_URL') ?? pg.vars.get('URL');
      await row('PostgreSQL', new PostgresLockProvider({ connectionString }));
    }
    if (wanted('etcd')) {
      const endpoints = (etcd.vars.get('ETCD_ENDPOINTS') ?? etcd.vars.get('URL')).split(',');
      await row('etcd', new EtcdLockProvider({ endpoints }));
    }
    if (wanted('zookeeper')) {
      const connectString = zk.vars.get('ZK_CONNECT') ?? zk.vars.get('URL');
      await row('ZooKeeper', new ZooKeeperLockProvider({ connectString, root: '' }));
    }
  } finally {
    await Promise.all([redis.stop(), etcd.stop(), pg.stop(), zk.stop()]);
  }
}
