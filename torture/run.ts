import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'fencekit';
import { type CheckResult, checkHistory } from './checker.js';
import { type TortureBackend, TortureCluster } from './cluster.js';
import { now } from './history.js';
import { LIBRARY_ENV } from './library-env.js';
import { runNemesis } from './nemesis.js';
import { seeded } from './random.js';
import { FencedStorage } from './storage.js';
import type { Unsafety } from './unsafe-provider.js';
import type { WorkerConfig } from './worker.js';
import { type WorkerHandle, WorkerPool } from './workers.js';

export interface TortureOptions {
  backend: TortureBackend;
  seconds: number;
  workers: number;
  seed: number;
  /** The forked worker's built entry (.tmp/torture/worker-main.js). */
  workerScript: string;
  /** false: the control run, plain writes without fencing. */
  fencing?: boolean;
  nemesis?: boolean;
  /** Only these fault kinds (see FAULTS in nemesis.ts). */
  faults?: string[];
  unsafe?: Unsafety;
  /** Where the history goes as JSONL (default: none). */
  historyDir?: string;
  log?: (line: string) => void;
}

export interface TortureReport extends CheckResult {
  backend: TortureBackend;
  seed: number;
  historyFile: string | undefined;
}

const TTL_MS = 2_000;
const CALL_TIMEOUT_MS = 1_000;
const KEYS = ['k0', 'k1'];
const ELECTION = 'leader';

/** A grant must follow a heal within this: a lease or session running out, one call, slack. */
export const PROGRESS_BOUND_MS = 2 * TTL_MS + CALL_TIMEOUT_MS + 5_000;

/**
 * One run: servers up, workers looping, the nemesis injecting faults for `seconds`, then a quiet
 * tail (so progress after the last heal can be seen), a clean stop, a leftover check, the verdict.
 */
export async function runTorture(options: TortureOptions): Promise<TortureReport> {
  const log = options.log ?? (() => undefined);
  const random = seeded(options.seed);
  log(
    `torture ${options.backend} seed=${options.seed} workers=${options.workers} seconds=${options.seconds} library=${process.env[LIBRARY_ENV] ?? 'this checkout'}`,
  );
  const cluster = await TortureCluster.start(options.backend);
  const pool = new WorkerPool(options.workerScript);
  const inProcess = options.backend === 'memory';
  const stopping = new AbortController();
  let spawned = 0;
  const start = async (mode: WorkerConfig['mode']) => {
    const id = `w${spawned++}`;
    const config: WorkerConfig = {
      id,
      url: await cluster.urlFor(id, options.seed),
      connectOptions: { ttlMs: TTL_MS, callTimeoutMs: CALL_TIMEOUT_MS },
      mode,
      keys: KEYS,
      election: ELECTION,
      storageUrl: cluster.storageUrl,
      fencing: options.fencing ?? true,
      seed: Math.floor(random() * 2 ** 31),
      criticalMaxMs: 300,
      ...(options.unsafe ? { unsafe: options.unsafe } : {}),
    };
    pool.start(config, inProcess);
  };
  let nemesis: Promise<unknown> = Promise.resolve();
  try {
    const storage = new FencedStorage(cluster.storageUrl, true);
    await storage.setup([...KEYS, ELECTION]);
    await storage.close();
    // One in four workers leads through runAsLeader; the rest take locks.
    for (let i = 0; i < options.workers; i++) await start(i % 4 === 3 ? 'leader' : 'lock');
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
                if (!stopping.signal.aborted) await start(dead.config.mode);
              },
            },
            stopping.signal,
          );
    await sleep(options.seconds * 1_000);
    stopping.abort();
    await nemesis;
    // Quiet tail: every fault has healed; grants must resume within the bound.
    await sleep(Math.min(PROGRESS_BOUND_MS, 6_000));
    await pool.stopAll();
    await checkLeftovers(cluster, options, pool);
  } finally {
    // A fault still running (after an error above) could restart a member into a stopped cluster.
    stopping.abort();
    await nemesis.catch(() => undefined);
    await cluster.stop();
  }
  const result = checkHistory(pool.history, { progressBoundMs: PROGRESS_BOUND_MS, ttlMs: TTL_MS });
  let historyFile: string | undefined;
  if (options.historyDir) {
    mkdirSync(options.historyDir, { recursive: true });
    historyFile = join(options.historyDir, `history-${options.backend}-${options.seed}.jsonl`);
    writeFileSync(historyFile, pool.history.map((e) => JSON.stringify(e)).join('\n'));
  }
  return { ...result, backend: options.backend, seed: options.seed, historyFile };
}

/**
 * After every worker closed, nothing of theirs may be held. Leases of crashed workers may still
 * be running: wait until they must have expired, then look.
 */
async function checkLeftovers(
  cluster: TortureCluster,
  options: TortureOptions,
  pool: WorkerPool,
): Promise<void> {
  if (options.backend === 'memory') return; // the in-process server dies with the run
  await sleep(TTL_MS * 2);
  const url = await cluster.urlFor('inspector', options.seed);
  const provider = await connect(url, { callTimeoutMs: 3_000 });
  try {
    for (const key of KEYS) {
      const info = await provider.inspect(key).catch((error: unknown) => ({ error }));
      if (info && ('error' in info || info.holder || info.waiters > 0)) {
        pool.record({ type: 'leftover', t: now(), key, detail: JSON.stringify(info, bigintJson) });
      }
    }
  } finally {
    await provider.close();
  }
}

const bigintJson = (_key: string, value: unknown) => (typeof value === 'bigint' ? String(value) : value);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
