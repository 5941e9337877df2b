import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'fencekit';
import type { CheckResult } from './checker.js';
import { type TortureBackend, TortureCluster } from './cluster.js';
import { now, type TortureEvent } from './history.js';
import { LIBRARY_ENV } from './library-env.js';
import { runNemesis } from './nemesis.js';
import { seeded } from './random.js';
import { shareOf } from './share.js';
import { FencedStorage } from './storage.js';
import type { WorkerConfig } from './worker.js';
import { type WorkerHandle, WorkerPool } from './workers.js';
import { workload } from './workloads/index.js';
import type { Workload, WorkloadName } from './workloads/workload.js';

export interface TortureOptions {
  backend: TortureBackend;
  /** The workloads run side by side, under one nemesis; those the backend lacks are skipped. */
  workloads: WorkloadName[];
  seconds: number;
  /** Workers per workload. */
  workers: number;
  seed: number;
  /** The forked worker's built entry (.tmp/torture/worker-main.js). */
  workerScript: string;
  /** false: the control run, plain writes without fencing. */
  fencing?: boolean;
  nemesis?: boolean;
  /** Only these fault kinds (see FAULTS in nemesis.ts). */
  faults?: string[];
  /** A control variant of one of the workloads (see each workload's `unsafe`). */
  unsafe?: string;
  /**
   * After the faulted part, the quiet tail lasts until every workload has made this many grants
   * (at most EXTRA_WAIT_MS longer): a busy machine makes a short run slow, not wrong.
   */
  minGrants?: number;
  /**
   * The faulted part lasts until the nemesis has injected this many faults (at most
   * EXTRA_WAIT_MS longer): on a busy machine the first grant, and so the first fault, come late.
   */
  minFaults?: number;
  /**
   * A control run: the faulted part lasts until the checker finds a violation of this rule (at
   * most EXTRA_WAIT_MS longer), so a busy machine that made the zombie's write come late
   * cannot turn the control green. The report is still judged on the whole history.
   */
  untilViolation?: string;
  /** Where the history goes as JSONL (default: none). */
  historyDir?: string;
  log?: (line: string) => void;
}

export interface TortureReport extends CheckResult {
  backend: TortureBackend;
  workload: WorkloadName;
  seed: number;
  historyFile: string | undefined;
}

const TTL_MS = 2_000;
const CALL_TIMEOUT_MS = 1_000;

/** A grant must follow a heal within this: a lease or session running out, one call, slack. */
export const PROGRESS_BOUND_MS = 2 * TTL_MS + CALL_TIMEOUT_MS + 5_000;

/** The workloads of `names` that `backend` has the recipe for. */
export function workloadsFor(backend: TortureBackend, names: readonly WorkloadName[]): Workload[] {
  return names.map(workload).filter((w) => w.backends.includes(backend));
}

/**
 * One run: servers up, every workload's workers looping side by side, the nemesis injecting faults
 * for `seconds`, then a quiet tail (so progress after the last heal can be seen), a clean stop, a
 * leftover check, and one verdict per workload on its share of the history.
 */
export async function runTorture(options: TortureOptions): Promise<TortureReport[]> {
  const log = options.log ?? (() => undefined);
  const workloads = workloadsFor(options.backend, options.workloads);
  if (workloads.length === 0) return [];
  const random = seeded(options.seed);
  log(
    `torture ${options.backend} workloads=${workloads.map((w) => w.name).join(',')} seed=${options.seed} workers=${options.workers} seconds=${options.seconds} library=${process.env[LIBRARY_ENV] ?? 'this checkout'}`,
  );
  const cluster = await TortureCluster.start(options.backend);
  const pool = new WorkerPool(options.workerScript);
  const inProcess = options.backend === 'memory';
  const stopping = new AbortController();
  /** worker id → its workload, for splitting the history. */
  const workloadOf = new Map<string, WorkloadName>();
  let spawned = 0;
  const start = async (w: Workload, mode: string) => {
    const id = `w${spawned++}`;
    workloadOf.set(id, w.name);
    const config: WorkerConfig = {
      id,
      workload: w.name,
      mode,
      url: await cluster.urlFor(id, options.seed),
      connectOptions: { ttlMs: TTL_MS, callTimeoutMs: CALL_TIMEOUT_MS },
      storageUrl: cluster.storageUrl,
      fencing: options.fencing ?? true,
      seed: Math.floor(random() * 2 ** 31),
      criticalMaxMs: 300,
      ...(options.unsafe && w.unsafe.includes(options.unsafe) ? { unsafe: options.unsafe } : {}),
    };
    pool.start(config, inProcess);
  };
  let nemesis: Promise<unknown> = Promise.resolve();
  try {
    const storage = new FencedStorage(cluster.storageUrl, true);
    await storage.setup(workloads.flatMap((w) => w.storageKeys));
    await storage.close();
    for (const w of workloads) for (let i = 0; i < options.workers; i++) await start(w, w.mode(i));
    nemesis =
      options.nemesis === false
        ? Promise.resolve()
        : runNemesis(
            {
              backend: options.backend,
              ...(options.faults ? { only: options.faults } : {}),
              cluster,
              pool,
              ttlMs: TTL_MS,
              random,
              log,
              respawn: async (dead: WorkerHandle) => {
                await cluster.dropWorker(dead.id);
                if (!stopping.signal.aborted) await start(workload(dead.config.workload), dead.config.mode);
              },
            },
            stopping.signal,
          );
    await sleep(options.seconds * 1_000);
    const faults = () => pool.history.filter((e) => e.type === 'fault').length;
    if (options.minFaults && options.nemesis !== false)
      await until(() => faults() >= (options.minFaults ?? 0));
    const rule = options.untilViolation;
    if (rule) await until(() => ruleBroken(pool, workloads, workloadOf, rule));
    stopping.abort();
    await nemesis;
    // Quiet tail: every fault has healed; grants must resume within the bound. Fixed, not ended at
    // the first grant after the last heal: a stall (stallAfterAcquire) is recorded only when it is
    // over, so a heal can still be on its way for up to 2 × TTL.
    await sleep(Math.min(PROGRESS_BOUND_MS, 6_000));
    const minGrants = options.minGrants;
    if (minGrants) await until(() => grantsMade(pool, workloads, workloadOf, minGrants));
    await pool.stopAll();
    await checkLeftovers(cluster, options, workloads, pool);
  } finally {
    // A fault still running (after an error above) could restart a member into a stopped cluster.
    stopping.abort();
    await nemesis.catch(() => undefined);
    await cluster.stop();
  }
  let historyFile: string | undefined;
  if (options.historyDir) {
    mkdirSync(options.historyDir, { recursive: true });
    const name = workloads.length === 1 ? `${options.backend}-${workloads[0]?.name}` : options.backend;
    historyFile = join(options.historyDir, `history-${name}-${options.seed}.jsonl`);
    writeFileSync(historyFile, pool.history.map((e) => JSON.stringify(e)).join('\n'));
  }
  return workloads.map((w) => {
    const share = shareOf(pool.history, w.name, workloadOf);
    const result = w.check(share, { progressBoundMs: PROGRESS_BOUND_MS, ttlMs: TTL_MS });
    return { ...result, backend: options.backend, workload: w.name, seed: options.seed, historyFile };
  });
}

/** How much longer than asked a run goes on for --min-grants, --min-faults or --until-violation. */
const EXTRA_WAIT_MS = 60_000;

/** Waits until `done()` holds, or EXTRA_WAIT_MS passed: the checker then judges what there is. */
async function until(done: () => boolean): Promise<void> {
  const giveUpAt = performance.now() + EXTRA_WAIT_MS;
  while (!done() && performance.now() < giveUpAt) await sleep(250);
}

/** Every workload's workers have recorded `count` grants. */
function grantsMade(
  pool: WorkerPool,
  workloads: readonly Workload[],
  workloadOf: ReadonlyMap<string, WorkloadName>,
  count: number,
): boolean {
  const grants = new Map<WorkloadName, number>();
  for (const e of pool.history) {
    const name = e.type === 'grant' ? workloadOf.get(e.worker) : undefined;
    if (name) grants.set(name, (grants.get(name) ?? 0) + 1);
  }
  return workloads.every((w) => (grants.get(w.name) ?? 0) >= count);
}

/** A workload's checker finds a violation of `rule` in the history so far. */
function ruleBroken(
  pool: WorkerPool,
  workloads: readonly Workload[],
  workloadOf: ReadonlyMap<string, WorkloadName>,
  rule: string,
): boolean {
  const limits = { progressBoundMs: PROGRESS_BOUND_MS, ttlMs: TTL_MS };
  return workloads.some((w) =>
    w.check(shareOf(pool.history, w.name, workloadOf), limits).violations.some((v) => v.rule === rule),
  );
}

/**
 * After every worker closed, nothing of theirs may be held. Leases of crashed workers (and of
 * releases a fault made fail) may still be running: what a look finds counts only once they must
 * have expired, 2 × TTL after the stop; a clean look before that ends the check at once.
 */
async function checkLeftovers(
  cluster: TortureCluster,
  options: TortureOptions,
  workloads: readonly Workload[],
  pool: WorkerPool,
): Promise<void> {
  // A look finding something looks again until then; only what the last look found counts.
  const lastLookAt = performance.now() + TTL_MS * 2;
  // memory://: the runner's own process holds the named server its in-process workers shared.
  const url = await cluster.urlFor('inspector', options.seed);
  const provider = await connect(url, { callTimeoutMs: 3_000 });
  try {
    for (const w of workloads) {
      for (;;) {
        const recorded: TortureEvent[] = [];
        const found = await w
          .leftovers({
            provider,
            url,
            storageUrl: cluster.storageUrl,
            backend: options.backend,
            record: (event) => recorded.push(event),
          })
          .catch((error: unknown) => [`leftover check failed: ${String(error)}`]);
        if (found.length > 0 && performance.now() < lastLookAt) {
          await sleep(250);
          continue;
        }
        for (const event of recorded) pool.record(event);
        for (const detail of found) pool.record({ type: 'leftover', t: now(), workload: w.name, detail });
        break;
      }
    }
  } finally {
    await provider.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
