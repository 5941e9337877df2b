// Failover time per backend, side by side: how long from the leader stopping until another
// candidate leads. Graceful: the leader resigns (runAsLeader's stop). SIGKILL: the leader's process
// dies and its lease / session must run out. Median of 10 trials each.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { connect, runAsLeader } from 'fencekit';
import { startServer } from './servers.mjs';

const root = resolve(import.meta.dirname, '..');
const TRIALS = 10;
const LEASE_MS = 1_000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Starts a successor that records when it is elected; returns a stopper. */
function successor(provider, name, elected) {
  const stop = new AbortController();
  const done = runAsLeader(
    provider,
    name,
    async ({ signal }) => {
      elected.at = performance.now();
      await new Promise((r) => signal.addEventListener('abort', r));
    },
    { signal: stop.signal, ttlMs: LEASE_MS, pollMs: 20, backoff: { initialMs: 5, maxMs: 20 } },
  );
  return async () => {
    stop.abort();
    await done;
  };
}

async function graceful(url, trial) {
  const name = `bench/failover/graceful/${trial}`;
  const [a, b] = [
    await connect(url, { sessionTtlMs: LEASE_MS }),
    await connect(url, { sessionTtlMs: LEASE_MS }),
  ];
  const stopA = new AbortController();
  let aLeads = false;
  const runA = runAsLeader(
    a,
    name,
    async ({ signal }) => {
      aLeads = true;
      await new Promise((r) => signal.addEventListener('abort', r));
    },
    { signal: stopA.signal, ttlMs: LEASE_MS },
  );
  while (!aLeads) await sleep(2);
  const elected = { at: 0 };
  const stopB = successor(b, name, elected);
  await sleep(100);
  const stoppedAt = performance.now();
  stopA.abort();
  await runA;
  while (!elected.at) await sleep(1);
  await stopB();
  await Promise.all([a.close(), b.close()]);
  return elected.at - stoppedAt;
}

async function killed(url, trial) {
  const name = `bench/failover/sigkill/${trial}`;
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `
    import { connect, runAsLeader } from '${root}/dist/index.js';
    const p = await connect(${JSON.stringify(url)}, { sessionTtlMs: ${LEASE_MS}, sessionTimeoutMs: ${LEASE_MS} });
    await runAsLeader(p, ${JSON.stringify(name)}, async () => { console.log('leading'); await new Promise(() => {}); }, { ttlMs: ${LEASE_MS} });`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await once(child.stdout, 'data');
  const b = await connect(url, { sessionTtlMs: LEASE_MS, sessionTimeoutMs: LEASE_MS });
  const elected = { at: 0 };
  const stopB = successor(b, name, elected);
  await sleep(200);
  const killedAt = performance.now();
  child.kill('SIGKILL');
  while (!elected.at) await sleep(2);
  await stopB();
  await b.close();
  return elected.at - killedAt;
}

export async function benchFailover() {
  const servers = {
    etcd: await startServer('etcd.sh', ['1']),
    zookeeper: await startServer('zookeeper.sh', ['1', '200']),
    redis: await startServer('redis.sh', ['1']),
    postgres: await startServer('postgres.sh', []),
  };
  const urls = {
    etcd: `etcd://${servers.etcd.vars.get('ETCD_ENDPOINTS').replace('http://', '')}`,
    zookeeper: `zk://${servers.zookeeper.vars.get('ZK_CONNECT')}`,
    redis: servers.redis.vars.get('REDIS_URL'),
    postgres: servers.postgres.vars.get('PG_URL'),
  };
  try {
    console.log(
      `\nFailover: leader stops → another candidate leads (median of ${TRIALS}, lease/session ${LEASE_MS} ms where configurable)`,
    );
    console.log(`${'backend'.padEnd(12)} ${'graceful resign ms'.padStart(20)} ${'SIGKILL ms'.padStart(12)}`);
    for (const [backend, url] of Object.entries(urls)) {
      const g = [];
      const k = [];
      for (let i = 0; i < TRIALS; i++) g.push(await graceful(url, i));
      // PostgreSQL has no lease: a killed process's connection closes and the lock goes with it.
      for (let i = 0; i < TRIALS; i++) k.push(await killed(url, i));
      console.log(
        `${backend.padEnd(12)} ${median(g).toFixed(1).padStart(20)} ${median(k).toFixed(0).padStart(12)}`,
      );
    }
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
  }
}
