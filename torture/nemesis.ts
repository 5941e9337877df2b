import type { TortureBackend, TortureCluster } from './cluster.js';
import { now, type TortureEvent } from './history.js';
import { between, pick } from './random.js';
import { sleep } from './sleep.js';
import { STALL_KIND } from './stall.js';
import type { WorkerHandle, WorkerPool } from './workers.js';

export interface NemesisContext {
  backend: TortureBackend;
  /** Only these fault kinds (default: every kind that makes sense for the backend). */
  only?: string[];
  cluster: TortureCluster;
  pool: WorkerPool;
  ttlMs: number;
  random: () => number;
  /** Starts a new worker in place of a crashed one. */
  respawn(dead: WorkerHandle): Promise<void>;
  log(line: string): void;
}

/** What a fault did: its target and the workers it froze (the checker distrusts their signals). */
interface Outcome {
  target: string;
  /** The workers it was aimed at; none: it hit the servers (every worker). */
  workers?: string[];
  pausedWorkers?: string[];
  late?: { worker: string; ms: number };
}

type Fault = (ctx: NemesisContext, stop: AbortSignal) => Promise<Outcome | null>;

const workers = (ctx: NemesisContext) => [...ctx.pool.workers.values()];

/** A worker inside a grant: one now, or the next to be granted (within 5 s). */
async function holder(ctx: NemesisContext): Promise<WorkerHandle | undefined> {
  const holders = workers(ctx).filter((w) => ctx.pool.holding.has(w.id));
  if (holders.length > 0) return pick(ctx.random, holders);
  return new Promise((resolve) => {
    const done = (w: WorkerHandle | undefined) => {
      clearTimeout(timer);
      unlisten();
      resolve(w);
    };
    const timer = setTimeout(() => done(undefined), 5_000);
    const unlisten = ctx.pool.listen((event: TortureEvent) => {
      if (event.type === 'grant') done(ctx.pool.workers.get(event.worker));
    });
  });
}

/** SIGSTOP a holder for longer than its lease: it wakes up believing it still holds. */
const pauseHolder: Fault = async (ctx, stop) => {
  const w = await holder(ctx);
  if (!w?.freeze) return null;
  const ms = between(ctx.random, ctx.ttlMs * 1.5, ctx.ttlMs * 3);
  w.freeze(true);
  await sleep(ms, stop);
  w.freeze(false);
  return { target: `${w.id} for ${ms} ms`, workers: [w.id], pausedWorkers: [w.id] };
};

/** SIGSTOP a worker the moment it asks for a lock: its grant (if any) arrives late. */
const pauseAfterRequest: Fault = async (ctx, stop) => {
  const frozen = await new Promise<WorkerHandle | undefined>((resolve) => {
    const timer = setTimeout(() => done(undefined), 5_000);
    const unlisten = ctx.pool.listen((event: TortureEvent) => {
      if (event.type !== 'request') return;
      const w = ctx.pool.workers.get(event.worker);
      if (!w?.freeze) return;
      w.freeze(true);
      done(w);
    });
    const done = (w: WorkerHandle | undefined) => {
      clearTimeout(timer);
      unlisten();
      resolve(w);
    };
  });
  if (!frozen?.freeze) return null;
  const ms = between(ctx.random, ctx.ttlMs * 1.5, ctx.ttlMs * 3);
  await sleep(ms, stop);
  frozen.freeze(false);
  return { target: `${frozen.id} for ${ms} ms`, workers: [frozen.id], pausedWorkers: [frozen.id] };
};

/**
 * A worker's event loop stalls (a long GC pause) right after its next acquire() call, past the
 * lease: the grant's reply is read after the lease ran out. No SIGSTOP timing luck: the worker
 * stalls itself and records the stall as this fault when it is over. The nemesis only arms it and
 * goes on (waiting for it kept short runs from injecting anything else); runNemesis disarms
 * every worker when it stops, so no stall starts in the quiet tail.
 */
const stallAfterAcquire: Fault = async (ctx) => {
  // A lock worker granted before (connected: its request leaves at once), and that calls acquire()
  // itself or through runAsLeader (etcd's and ZooKeeper's native elections do not).
  const granted = new Set(ctx.pool.history.flatMap((e) => (e.type === 'grant' ? [e.worker] : [])));
  const native = ctx.backend === 'etcd' || ctx.backend === 'zookeeper';
  const candidates = workers(ctx).filter(
    (w) => w.config.workload === 'lock' && granted.has(w.id) && (w.config.mode === 'lock' || !native),
  );
  if (candidates.length === 0) return null;
  const w = pick(ctx.random, candidates);
  const ms = between(ctx.random, ctx.ttlMs + 200, ctx.ttlMs * 2);
  w.stallAfterAcquire(ms);
  ctx.log(`nemesis: ${STALL_KIND} armed in ${w.id} for ${ms} ms`);
  return null;
};

/** SIGKILL (or simulated crash) of a holder; a fresh worker takes its place (unless the holder was its child). */
const killWorker: Fault = async (ctx) => {
  const w = await holder(ctx);
  if (!w) return null;
  w.crash();
  // A worker whose holder is a child process killed that child and runs on (cli).
  if (w.survivesCrash) return { target: `${w.id}'s holder process`, workers: [w.id] };
  await sleep(200);
  await ctx.respawn(w);
  return { target: w.id, workers: [w.id] };
};

/** A worker's connections hold every byte both ways, then deliver them on heal. */
const partitionWorker: Fault = async (ctx, stop) => {
  const w = pick(ctx.random, workers(ctx));
  const proxies = ctx.cluster.proxiesOf(w.id);
  const ms = between(ctx.random, ctx.ttlMs / 2, ctx.ttlMs * 2);
  if (w.partition) w.partition(true);
  else if (proxies.length > 0) for (const p of proxies) p.setMode({ kind: 'partition' });
  else return null;
  await sleep(ms, stop);
  if (w.partition) w.partition(false);
  for (const p of proxies) p.setMode({ kind: 'pass' });
  return { target: `${w.id} for ${ms} ms`, workers: [w.id] };
};

/**
 * Late replies to one worker: its grants and renewals arrive late, up to half a lease after the
 * lease ran out (a grant that arrives already lost must not be handed out); then its connections
 * are reset.
 */
const delayWorker: Fault = async (ctx, stop) => {
  const w = pick(ctx.random, workers(ctx));
  const proxies = ctx.cluster.proxiesOf(w.id);
  if (proxies.length === 0) return null;
  const late = between(ctx.random, ctx.ttlMs / 2, ctx.ttlMs * 1.5);
  const ms = late + between(ctx.random, 1_000, 2_500); // long enough for late replies to arrive
  for (const p of proxies) p.setMode({ kind: 'delay', direction: 'toClient', ms: late });
  await sleep(ms, stop);
  // Heal with a reset: replies still held back are dropped, so every reply that reached the
  // worker during the fault (and none after it) was held back `late` ms — what the checker relies on.
  for (const p of proxies) {
    p.reset();
    p.setMode({ kind: 'pass' });
  }
  const leaseAtServer = ctx.backend === 'redis' || ctx.backend === 'redlock';
  return {
    target: `${w.id} replies ${late} ms late for ${ms} ms`,
    workers: [w.id],
    ...(leaseAtServer ? { late: { worker: w.id, ms: late } } : {}),
  };
};

/** Kill a cluster member (any, the leader included) and restart it with its data. */
const memberKill: Fault = async (ctx, stop) => {
  const index = between(ctx.random, 0, ctx.cluster.members - 1);
  const ms = between(ctx.random, 1_000, 3_000);
  const ensemble = ctx.cluster.ensemble;
  if (ensemble) {
    await ensemble.kill(index);
    await sleep(ms, stop);
    await ensemble.restart(index);
    return { target: `node ${index} down ${ms} ms` };
  }
  const killed = ctx.cluster.killMember(index);
  await sleep(ms, stop);
  killed.restart();
  return { target: `member ${index} down ${ms} ms` };
};

/** SIGSTOP a cluster member: a hung peer with its sockets open. */
const memberPause: Fault = async (ctx, stop) => {
  const index = between(ctx.random, 0, ctx.cluster.members - 1);
  const ms = between(ctx.random, 500, 2_500);
  ctx.cluster.pauseMember(index, true);
  await sleep(ms, stop);
  ctx.cluster.pauseMember(index, false);
  return { target: `member ${index} frozen ${ms} ms` };
};

/**
 * memory:// only: the whole process stalls (a long GC pause) — workers, their timers and the
 * in-process server alike; leases run out meanwhile, and grants in flight arrive late.
 */
const stallProcess: Fault = async (ctx) => {
  const ms = between(ctx.random, ctx.ttlMs, ctx.ttlMs * 2);
  const paused = workers(ctx).map((w) => w.id);
  // Blocked, not busy: nothing else in this process runs, and the core stays free for the servers.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  return { target: `everything for ${ms} ms`, pausedWorkers: paused };
};

/**
 * ZooKeeper: cut a follower off from its peers (bytes held, no reset) while clients still reach
 * it; a session it serves must not be confirmed by it alone.
 */
const isolateFollower: Fault = async (ctx, stop) => {
  const ensemble = ctx.cluster.ensemble;
  if (!ensemble) return null;
  const modes = await Promise.all([0, 1, 2].map((i) => ensemble.mode(i)));
  const followers = [0, 1, 2].filter((i) => modes[i] === 'follower');
  if (followers.length === 0) return null;
  const node = pick(ctx.random, followers);
  const ms = between(ctx.random, ctx.ttlMs * 2, ctx.ttlMs * 4);
  ensemble.isolate(node);
  await sleep(ms, stop);
  ensemble.heal(node);
  return { target: `node ${node} for ${ms} ms` };
};

const redisPause: Fault = async (ctx) => {
  const index = between(ctx.random, 0, ctx.cluster.members - 1);
  const ms = between(ctx.random, 300, ctx.ttlMs * 2);
  await ctx.cluster.redisPause(index, ms);
  await sleep(ms);
  return { target: `instance ${index} for ${ms} ms` };
};

const pgTerminate: Fault = async (ctx) => {
  const ended = await ctx.cluster.pgTerminate();
  return { target: `${ended} sessions` };
};

/**
 * PostgreSQL crashes (SIGKILL of the server and its backends) and comes back on its data after
 * 0.5–2 s: every lock and session is gone at once, every commit stays, so the idempotency store's
 * records and token sequence must come back as they were.
 */
const pgRestart: Fault = async (ctx) => {
  const ms = between(ctx.random, 500, 2_000);
  try {
    await ctx.cluster.pgRestart(ms);
  } catch (error) {
    // Recorded all the same: the server was down (maybe still is), and the checker must know.
    return { target: `server down ${ms} ms, then the restart failed: ${String(error).slice(0, 200)}` };
  }
  return { target: `server down ${ms} ms` };
};

const PROCESS_FAULTS = {
  pauseHolder,
  pauseAfterRequest,
  stallAfterAcquire,
  killWorker,
  partitionWorker,
  delayWorker,
};

/** The faults that make sense for each backend. */
export const FAULTS: Record<TortureBackend, Record<string, Fault>> = {
  memory: { killWorker, partitionWorker, stallProcess },
  redis: { ...PROCESS_FAULTS, redisPause },
  // A Redis restart without persistence is a fault Redlock is documented not to survive: not here.
  redlock: { ...PROCESS_FAULTS, redisPause, memberPause },
  postgres: { ...PROCESS_FAULTS, pgTerminate, pgRestart },
  etcd: { ...PROCESS_FAULTS, memberKill, memberPause },
  zookeeper: { ...PROCESS_FAULTS, memberKill, memberPause, isolateFollower },
};

/**
 * Injects faults one at a time from the seeded random source until `stop`, with quiet gaps
 * between them, and records each as a fault event. Every fault heals itself before it returns.
 */
export async function runNemesis(ctx: NemesisContext, stop: AbortSignal): Promise<void> {
  const kinds = Object.entries(FAULTS[ctx.backend]).filter(([kind]) => !ctx.only || ctx.only.includes(kind));
  if (kinds.length === 0) throw new Error(`no fault of ${ctx.only?.join(', ')} applies to ${ctx.backend}`);
  // Faults start once the workers have connected and something was granted.
  for (let i = 0; i < 100 && !stop.aborted && !ctx.pool.history.some((e) => e.type === 'grant'); i++) {
    await sleep(100, stop);
  }
  while (!stop.aborted) {
    const [kind, fault] = pick(ctx.random, kinds);
    const t = now();
    let outcome: Outcome | null = null;
    try {
      outcome = await fault(ctx, stop);
    } catch (error) {
      ctx.log(`nemesis: ${kind} failed: ${String(error)}`);
    }
    if (outcome) {
      const tEnd = now();
      ctx.pool.record({
        type: 'fault',
        t,
        tEnd,
        kind,
        target: outcome.target,
        pausedWorkers: outcome.pausedWorkers ?? [],
        ...(outcome.workers ? { workers: outcome.workers } : {}),
        ...(outcome.late ? { late: outcome.late } : {}),
      });
      ctx.log(`nemesis: ${kind} ${outcome.target}`);
    }
    await sleep(between(ctx.random, 500, 3_000), stop);
  }
  for (const w of workers(ctx)) w.stallAfterAcquire(0);
}
