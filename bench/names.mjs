// Scale of state: N names held at once by one process (100,000 by default), per backend: how long
// acquiring them took, the client's heap per held name, what the server stores per name (keys,
// nodes or rows, and advisory locks), and how long close() takes to release them all. Names are
// acquired CONCURRENCY at a time, as a service that locks one row per request would.
//
// FENCEKIT_BENCH_NAMES=10000  another count; FENCEKIT_BENCH_ONLY=redis,etcd  only those rows.
import { connect } from 'fencekit';
import { Redis } from 'ioredis';
import pg from 'pg';
import { startServer } from './servers.mjs';

const names = Number(process.env.FENCEKIT_BENCH_NAMES ?? 100_000);
const only = process.env.FENCEKIT_BENCH_ONLY?.split(',');
const CONCURRENCY = 200;
/** A backend that cannot hold them all gets this long, then its row says how far it got. */
const BUDGET_MS = 10 * 60_000;

function heapNow() {
  globalThis.gc?.();
  globalThis.gc?.();
  return process.memoryUsage().heapUsed;
}

/** Acquires `names` names on one provider, measures, then closes it (releasing them all). */
async function holdMany(url, countOnServer, ttlMs) {
  const provider = await connect(url, { callTimeoutMs: 30_000 });
  const before = heapNow();
  const held = [];
  let failed = 0;
  let firstError;
  let next = 0;
  const startedAt = performance.now();
  const deadline = startedAt + BUDGET_MS;
  const worker = async () => {
    while (next < names && performance.now() < deadline && failed < 100) {
      const i = next++;
      try {
        held.push(await provider.acquire(`bench/names/${i}`, { ...ttlMs, waitMs: 0 }));
      } catch (error) {
        failed++;
        firstError ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const acquireMs = performance.now() - startedAt;
  const heapPerName = (heapNow() - before) / Math.max(1, held.length);
  const server = await countOnServer().catch((error) => `? (${error.message})`);
  const closedAt = performance.now();
  await provider.close();
  const closeMs = performance.now() - closedAt;
  const after = await countOnServer().catch((error) => `? (${error.message})`);
  return {
    held: held.length,
    failed,
    firstError: firstError && `${firstError.code ?? ''} ${firstError.message}`.slice(0, 140),
    acquireMs,
    heapPerName,
    server,
    serverAfter: after,
    closeMs,
  };
}

export async function benchNames() {
  const want = (name) => !only || only.includes(name);
  const servers = {};
  const rows = [];
  try {
    if (want('memory')) rows.push(['memory', 'memory://', async () => '-']);
    if (want('redis')) {
      servers.redis = await startServer('redis.sh', ['1']);
      const url = servers.redis.vars.get('REDIS_URL');
      rows.push([
        'Redis',
        url,
        async () => {
          const redis = new Redis(url);
          try {
            return `${await redis.dbsize()} keys`;
          } finally {
            redis.disconnect();
          }
        },
      ]);
    }
    if (want('etcd')) {
      servers.etcd = await startServer('etcd.sh', ['1']);
      const endpoint = servers.etcd.vars.get('ETCD_ENDPOINTS');
      rows.push([
        'etcd',
        `etcd://${endpoint.replace('http://', '')}`,
        async () => {
          // A count-only range over every key (etcd's JSON gateway: key "\0" to "\0" = all keys).
          const body = JSON.stringify({ key: 'AA==', range_end: 'AA==', count_only: true });
          const answer = await fetch(`${endpoint}/v3/kv/range`, { method: 'POST', body });
          return `${(await answer.json()).count ?? 0} keys`;
        },
      ]);
    }
    if (want('zookeeper')) {
      servers.zookeeper = await startServer('zookeeper.sh', ['1']);
      const connectString = servers.zookeeper.vars.get('ZK_CONNECT');
      rows.push(['ZooKeeper', `zk://${connectString}`, () => zkNodeCount(connectString)]);
    }
    if (want('postgres')) {
      servers.postgres = await startServer('postgres.sh', []);
      const url = servers.postgres.vars.get('PG_URL');
      rows.push([
        'PostgreSQL',
        url,
        async () => {
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          try {
            const { rows } = await client.query(
              "select count(*)::int as n from pg_locks where locktype = 'advisory'",
            );
            return `${rows[0].n} advisory locks`;
          } finally {
            await client.end();
          }
        },
      ]);
    }
    console.log(`\nScale of state: ${names.toLocaleString('en')} names held by one process`);
    console.log(
      `${'backend'.padEnd(12)} ${'held'.padStart(8)} ${'acquire s'.padStart(10)} ${'heap B/name'.padStart(12)} ${'close s'.padStart(8)}  server while held → after close`,
    );
    const results = [];
    for (const [name, url, count] of rows) {
      // A lease long enough to outlast the run, where the backend has one per grant.
      const ttl = ['ZooKeeper', 'PostgreSQL'].includes(name) ? {} : { ttlMs: 600_000 };
      const r = await holdMany(url, count, ttl);
      results.push({ name, ...r });
      console.log(
        `${name.padEnd(12)} ${String(r.held).padStart(8)} ${(r.acquireMs / 1000).toFixed(1).padStart(10)} ${r.heapPerName.toFixed(0).padStart(12)} ${(r.closeMs / 1000).toFixed(1).padStart(8)}  ${r.server} → ${r.serverAfter}${r.failed ? `; ${r.failed} failed: ${r.firstError}` : ''}`,
      );
    }
    return results;
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
  }
}

/** Nodes in the whole tree, from the server's `mntr` four-letter word (zk_znode_count). */
async function zkNodeCount(connectString) {
  const { createConnection } = await import('node:net');
  const [host, port] = connectString.split(',')[0].split(':');
  const text = await new Promise((resolve, reject) => {
    const socket = createConnection({ host, port: Number(port) }, () => socket.end('mntr'));
    let out = '';
    socket.on('data', (chunk) => {
      out += chunk;
    });
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
  });
  const found = /zk_znode_count\s+(\d+)/.exec(text);
  return found ? `${found[1]} nodes` : '? nodes (mntr not whitelisted)';
}
