// Idempotency keys: what store.run costs per request (a new key: begin + fn + fenced completion; a
// replay: one begin that finds the result) against the bare writes any idempotency store must make
// on the same server. A new key needs two round trips whatever the store: a claim before fn (or a
// concurrent repeat would run fn too) and the result after it. So the floor is INSERT + UPDATE of a
// record (PostgreSQL), a claim script + a result script (Redis), a create-if-absent Txn + a put
// (etcd); a replay's floor is one write
// attempt that finds the record. The cases run in interleaved rounds; on a shared machine only the
// ratio of neighbours in one round means much, so each round's ratio is printed (min–max). Each
// backend is measured in two fixed CPU layouts (bench/pin.mjs says why).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { createIdempotencyStore } from 'fencekit/idempotency';
import { Redis } from 'ioredis';
import pg from 'pg';
import { applyLayout, cpuLayouts, resetLayout } from './pin.mjs';
import { startServer } from './servers.mjs';
import { printTable } from './table.mjs';

const fn = async () => ({ charge: 'ch_1', amountCents: 4200 });
const payload = { order: 42, amountCents: 4200, card: '4242' };
const body = JSON.stringify({ charge: 'ch_1', amountCents: 4200 });
const options = { rounds: 7, iterations: 300, warmup: 200 };
const COUNTED_RUNS = 200;
// The target: a request's p50 within 1.5x of the bare writes, judged on the median of the
// per-round p50 ratios where client and server each have a CPU (as a store runs, on another host:
// each message wakes the other side). The one-CPU layout has no wake-ups and compares CPU work
// alone; it is printed beside, with no target. Unpinned figures are indicative only.
const TARGET = 1.5;
// FENCEKIT_BENCH_ONLY=redis (or postgres, etcd, comma-separated): only those backends.
const only = process.env.FENCEKIT_BENCH_ONLY?.split(',');
const chosen = (backend) => !only || only.includes(backend);

export async function benchIdempotency() {
  const none = { vars: new Map(), started: false, stop: async () => {} };
  const [postgres, redis, etcd] = await Promise.all([
    chosen('postgres') ? startServer('postgres.sh', [], 'FENCEKIT_PG_URL') : none,
    chosen('redis') ? startServer('redis.sh', ['1'], 'FENCEKIT_REDIS_URL') : none,
    chosen('etcd') ? startServer('etcd.sh', ['1'], 'FENCEKIT_ETCD_ENDPOINTS') : none,
  ]);
  const verdicts = [];
  try {
    if (chosen('postgres'))
      await benchPostgres(
        postgres.vars.get('PG_URL') ?? postgres.vars.get('URL'),
        postgres.started,
        verdicts,
      );
    if (chosen('redis'))
      await benchRedis(redis.vars.get('REDIS_URL') ?? redis.vars.get('URL'), redis.started, verdicts);
    if (chosen('etcd'))
      await benchEtcd(etcd.vars.get('ETCD_ENDPOINTS') ?? etcd.vars.get('URL'), etcd, verdicts);
  } finally {
    await Promise.all([postgres.stop(), redis.stop(), etcd.stop()]);
  }
  console.log(`\nIdempotency target: p50 within ${TARGET}x of the bare writes (median of per-round ratios)`);
  for (const { name, ratio, verdict } of verdicts)
    console.log(`${name.padEnd(48)} ${`${ratio.toFixed(2)}x`.padStart(8)}  ${verdict}`);
}

async function benchPostgres(url, pinnable, verdicts) {
  const raw = new pg.Client({ connectionString: url });
  // A server that dies mid-run, or is stopped after a failure while this client is open: the
  // client's error must not end the process before the failure is reported.
  raw.on('error', () => undefined);
  await raw.connect();
  let store;
  try {
    store = await createIdempotencyStore(url, { maxConnections: 1 });
    await measurePostgres(raw, store, pinnable, verdicts);
  } finally {
    await raw.query('DROP TABLE IF EXISTS bench_bare').catch(() => undefined);
    await raw.end().catch(() => undefined);
    await store?.close();
  }
}

async function measurePostgres(raw, store, pinnable, verdicts) {
  await raw.query(`CREATE TABLE IF NOT EXISTS bench_bare (key text PRIMARY KEY, payload_hash text, state text,
    token bigint, lease_until timestamptz, body text, expires_at timestamptz)`);
  await store.run('warm', payload, fn); // creates the table
  const replayKey = `replay-${crypto.randomUUID()}`;
  await store.run(replayKey, payload, fn);
  const hash = store.hash(payload);
  await raw.query(`INSERT INTO bench_bare VALUES ($1, $2, 'done', 1, now(), $3, now() + interval '1 day')`, [
    replayKey,
    hash,
    body,
  ]);
  const insert = `INSERT INTO bench_bare VALUES ($1, $2, 'running', 1, now() + interval '30 s', NULL,
    now() + interval '1 day') ON CONFLICT (key) DO NOTHING RETURNING key`;
  // A replay's floor must do what the store's begin does: find the record and return what it holds
  // (hash, state, result), inserting only when there is none, in one prepared statement. The
  // unnamed INSERT above finds the conflict but returns nothing: too little for a replay's floor.
  const findOrInsert = {
    name: 'bare-find-or-insert',
    text: `WITH found AS (SELECT payload_hash, state, body FROM bench_bare WHERE key = $1),
      ins AS (INSERT INTO bench_bare SELECT $1, $2, 'running', 1, now() + interval '30 s', NULL,
          now() + interval '1 day' WHERE NOT EXISTS (SELECT 1 FROM found)
        ON CONFLICT (key) DO NOTHING RETURNING key)
      SELECT payload_hash, state, body FROM found`,
  };
  // Statements per run: every query of a pg Client (the class of the store's pool: the store loads
  // this same pg) while only the store runs; each is one round trip. Counted at the client, not at
  // pool.query: the store checks a client out and queries it, so pool.query would count none.
  const clientProto = pg.Client.prototype;
  const query = clientProto.query;
  let queries = 0;
  clientProto.query = function (...args) {
    queries += 1;
    return query.apply(this, args);
  };
  const perRun = async (run) => {
    queries = 0;
    for (let i = 0; i < COUNTED_RUNS; i++) await run();
    if (queries === 0) throw new Error('no store statement was counted: the counter missed the store');
    return `${(queries / COUNTED_RUNS).toFixed(2)} round trips/run`;
  };
  try {
    const newKey = await perRun(() => store.run(crypto.randomUUID(), payload, fn));
    const replay = await perRun(() => store.run(replayKey, payload, fn));
    console.log(`\nPostgreSQL, store statements: new key ${newKey}, replay ${replay}`);
  } finally {
    clientProto.query = query;
  }
  // Each client's own server process (one connection each), for the CPU time it spends serving it.
  const backendPid = async (client) => (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  // The store's one connection (maxConnections 1) is the server's only other client backend.
  const otherClientPids = async () =>
    (
      await raw.query(`SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
        AND datname = current_database() AND pid <> pg_backend_pid()`)
    ).rows.map((row) => row.pid);
  const storePids = await otherClientPids();
  if (storePids.length !== 1)
    throw new Error(`expected the store's one connection, found ${storePids.length}`);
  const [bare, own] = [await backendPid(raw), storePids[0]];
  const serverPids = {
    'bare INSERT + UPDATE of a record (new key)': bare,
    'fencekit store.run, new key': own,
    'bare find-or-INSERT returning the record': bare,
    'fencekit store.run, replay': own,
  };
  const postmaster = pinnable ? await postmasterPid(raw) : null;
  const cases = {
    'bare INSERT + UPDATE of a record (new key)': async () => {
      const key = crypto.randomUUID();
      await raw.query(insert, [key, hash]);
      await raw.query(`UPDATE bench_bare SET state = 'done', body = $2 WHERE key = $1 AND token = 1`, [
        key,
        body,
      ]);
    },
    'fencekit store.run, new key': () => store.run(crypto.randomUUID(), payload, fn),
    'bare find-or-INSERT returning the record': async () => {
      const { rows } = await raw.query({ ...findOrInsert, values: [replayKey, hash] });
      if (rows[0]?.state !== 'done') throw new Error('the bare replay did not find the record');
    },
    'fencekit store.run, replay': () => store.run(replayKey, payload, fn),
  };
  await measureInLayouts('PostgreSQL', cases, serverPids, postmaster ? [postmaster] : [], verdicts);
}

async function benchRedis(url, pinnable, verdicts) {
  const raw = new Redis(url);
  raw.on('error', () => undefined); // as in benchPostgres
  let store;
  try {
    store = await createIdempotencyStore(url);
    await measureRedis(raw, store, pinnable, verdicts);
  } finally {
    raw.disconnect();
    await store?.close();
  }
}

async function measureRedis(raw, store, pinnable, verdicts) {
  const replayKey = `replay-${crypto.randomUUID()}`;
  await store.run(replayKey, payload, fn);
  const hash = store.hash(payload);
  // The least a script-based store does: claim the key (or find it) with an expiry, later store the
  // result. Neither reads the server's clock nor draws a token: those are what fencing costs.
  raw.defineCommand('bareBegin', {
    numberOfKeys: 1,
    lua: `if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HMGET', KEYS[1], 'h', 's', 'b') end
      redis.call('HSET', KEYS[1], 'h', ARGV[1], 's', 'r', 't', 1)
      redis.call('PEXPIRE', KEYS[1], 86400000) return 1`,
  });
  raw.defineCommand('bareComplete', {
    numberOfKeys: 1,
    lua: `redis.call('HSET', KEYS[1], 's', 'd', 'b', ARGV[1]) return 1`,
  });
  await raw.bareBegin(`bare:${replayKey}`, hash);
  // Commands per run, from the server's own counts (INFO commandstats): the calls (round trips)
  // and the commands the scripts ran.
  const stats = async () => {
    const text = await raw.info('commandstats');
    return new Map(
      [...text.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].map(([, name, calls]) => [name, Number(calls)]),
    );
  };
  const counted = async (run) => {
    const before = await stats();
    for (let i = 0; i < COUNTED_RUNS; i++) await run();
    const after = await stats();
    const per = [...after]
      .filter(([name]) => name !== 'info')
      .map(([name, calls]) => [name, (calls - (before.get(name) ?? 0)) / COUNTED_RUNS])
      .filter(([, n]) => n > 0);
    return per.map(([name, n]) => `${name} ${n}`).join(', ');
  };
  console.log(
    `\nRedis, commands per run: new key: ${await counted(() => store.run(crypto.randomUUID(), payload, fn))}; replay: ${await counted(() => store.run(replayKey, payload, fn))}; bare new key: ${await counted(
      async () => {
        const key = `bare:${crypto.randomUUID()}`;
        await raw.bareBegin(key, hash);
        await raw.bareComplete(key, body);
      },
    )}`,
  );
  const pid = Number(/process_id:(\d+)/.exec(await raw.info('server'))[1]);
  const serverPids = new Proxy({}, { get: () => pid }); // one server process serves both clients
  const cases = {
    'bare claim + result scripts (new key)': async () => {
      const key = `bare:${crypto.randomUUID()}`;
      await raw.bareBegin(key, hash);
      await raw.bareComplete(key, body);
    },
    'fencekit store.run, new key': () => store.run(crypto.randomUUID(), payload, fn),
    'bare claim script finding the record': () => raw.bareBegin(`bare:${replayKey}`, hash),
    'fencekit store.run, replay': () => store.run(replayKey, payload, fn),
  };
  await measureInLayouts('Redis', cases, serverPids, pinnable ? [pid] : [], verdicts);
}

async function benchEtcd(endpoints, server, verdicts) {
  const raw = new Etcd3({ hosts: endpoints.split(',') });
  let store;
  try {
    store = await createIdempotencyStore(`etcd://${endpoints.replace(/https?:\/\//g, '')}`);
    await measureEtcd(raw, store, server, verdicts);
  } finally {
    raw.close();
    await store?.close();
  }
}

async function measureEtcd(raw, store, server, verdicts) {
  const replayKey = `replay-${crypto.randomUUID()}`;
  await store.run(replayKey, payload, fn);
  const hash = store.hash(payload);
  // The least an etcd store does: create the record if absent (else read it) in one Txn, later put
  // the result. No lease, no claim, no token compare: those are what fencing costs.
  const claim = (key) =>
    raw
      .if(key, 'Create', '==', 0)
      .then(raw.put(key).value(JSON.stringify({ h: hash, s: 'r' })))
      .else(raw.get(key))
      .commit();
  await raw.put(`bare/${replayKey}`).value(JSON.stringify({ h: hash, s: 'd', b: body }));
  const pid = Number(server.vars.get('MEMBER_0')?.split(' ')[2]);
  const serverPids = new Proxy({}, { get: () => pid });
  const cases = {
    'bare create-if-absent Txn + put (new key)': async () => {
      const key = `bare/${crypto.randomUUID()}`;
      await claim(key);
      await raw.put(key).value(JSON.stringify({ h: hash, s: 'd', b: body }));
    },
    'fencekit store.run, new key': () => store.run(crypto.randomUUID(), payload, fn),
    'bare create-if-absent Txn finding the record': async () => {
      const found = await claim(`bare/${replayKey}`);
      if (found.succeeded) throw new Error('the bare replay did not find the record');
    },
    'fencekit store.run, replay': () => store.run(replayKey, payload, fn),
  };
  await measureInLayouts('etcd', cases, serverPids, server.started && pid ? [pid] : [], verdicts);
}

/**
 * Measures and prints the cases in each CPU layout (bench/pin.mjs), pinning only `pinned` servers,
 * and adds a verdict row per pair to `verdicts`.
 */
async function measureInLayouts(backend, cases, serverPids, pinned, verdicts) {
  try {
    for (const layout of cpuLayouts(pinned.length > 0)) {
      applyLayout(layout, pinned);
      const medians = printPairs(
        `${backend}, ${layout.name}`,
        await measureRounds(cases, options, serverPids),
      );
      for (const [pair, ratio] of medians)
        verdicts.push({
          name: `${backend} ${pair}, ${layout.name}`,
          ratio,
          verdict: verdict(layout.name, ratio),
        });
    }
  } finally {
    resetLayout(pinned);
  }
}

/** The target's verdict for a median ratio, compared as printed (two decimals). */
function verdict(layoutName, ratio) {
  const within = Math.round(ratio * 100) / 100 <= TARGET;
  if (layoutName === 'separate CPUs') return within ? 'met' : 'NOT met';
  if (layoutName === 'unpinned') return `${within ? 'within' : 'over'} (unpinned: indicative only)`;
  return 'no target (both sides on one CPU)';
}

/** The server's postmaster, when it runs on this machine (its backends are its children), else null. */
async function postmasterPid(client) {
  try {
    const { rows } = await client.query('SHOW data_directory');
    return Number(readFileSync(join(rows[0].data_directory, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return null; // not readable from here: the server is left where the scheduler puts it
  }
}

/** CPU time (µs) a process has used so far, from the scheduler's own count (ns precision). */
function cpuMicros(pid) {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1_000;
}

/**
 * Interleaved rounds (A B C D A B C D …): returns, per case, every sample, each round's p50 (so that
 * a ratio can be taken between neighbours of the same round), and the CPU time per call of this
 * process and of the server process serving it (`serverPids[name]`): work, which the machine's load
 * distorts far less than latency.
 */
async function measureRounds(cases, { rounds, iterations, warmup }, serverPids) {
  const entries = Object.entries(cases);
  for (const [, run] of entries) for (let i = 0; i < warmup; i++) await run();
  const results = entries.map(([name]) => ({ name, samples: [], roundP50: [], clientCpu: 0, serverCpu: 0 }));
  for (let round = 0; round < rounds; round++) {
    for (const [index, [name, run]] of entries.entries()) {
      const samples = new Float64Array(iterations);
      const server = cpuMicros(serverPids[name]);
      const client = process.cpuUsage();
      for (let i = 0; i < iterations; i++) {
        const start = process.hrtime.bigint();
        await run();
        samples[i] = Number(process.hrtime.bigint() - start) / 1_000;
      }
      const used = process.cpuUsage(client);
      results[index].clientCpu += (used.user + used.system) / iterations / rounds;
      results[index].serverCpu += (cpuMicros(serverPids[name]) - server) / iterations / rounds;
      results[index].samples.push(...samples);
      results[index].roundP50.push(samples.sort()[iterations >> 1]);
    }
  }
  return results;
}

/**
 * Rows come as (floor, fencekit) pairs: each pair is its own table, the ratios against its floor.
 * Returns each pair's median per-round p50 ratio.
 */
function printPairs(backend, results) {
  const medians = [];
  for (const [title, pair] of [
    ['new key', results.slice(0, 2)],
    ['replay', results.slice(2, 4)],
  ]) {
    const rows = pair.map(({ name, samples }) => {
      const sorted = Float64Array.from(samples).sort();
      const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
      return { name, p50: at(0.5), p99: at(0.99) };
    });
    printTable(`${backend}, idempotency: ${title} (1 client, loopback)`, rows);
    const ratios = pair[1].roundP50.map((p50, round) => p50 / pair[0].roundP50[round]).sort((a, b) => a - b);
    const median = ratios[ratios.length >> 1];
    medians.push([title, median]);
    console.log(
      `${'per-round p50 ratios'.padEnd(48)} ${ratios.map((r) => r.toFixed(2)).join(' ')} (median ${median.toFixed(2)})`,
    );
    const [floor, fencekit] = pair.map((r) => `${r.clientCpu.toFixed(1)} + ${r.serverCpu.toFixed(1)}`);
    const ratio = (pair[1].clientCpu + pair[1].serverCpu) / (pair[0].clientCpu + pair[0].serverCpu);
    console.log(`${'CPU µs/call, client + server'.padEnd(48)} ${floor} → ${fencekit} (${ratio.toFixed(2)}×)`);
  }
  return medians;
}
