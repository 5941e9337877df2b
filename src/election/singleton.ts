import { hostname } from 'node:os';
import { Cron } from 'croner';
import { sleepUnlessWoken } from '../backoff.js';
import { AuthenticationError, InvalidArgumentError } from '../errors.js';
import { ProviderEvents } from '../events.js';
import { linkSignals } from '../signals.js';
import { telemetryOf } from '../telemetry/telemetry.js';
import type { LockProvider } from '../types.js';
import { MAX_TTL_MS, MIN_TTL_MS, validateTtlMs } from '../validate.js';

/** What `runSingleton` runs at each tick, on one replica. */
export interface SingletonJob {
  /** Aborted when the lock is lost or the runner stops. */
  signal: AbortSignal;
  /** Fencing token of this run. */
  term: bigint;
  /** The scheduled time of this tick (the same on every replica). */
  tick: Date;
}

/** Where the replicas record the last tick that ran; share one between processes (e.g. a table). */
export interface SingletonLedger {
  lastRun(name: string): Promise<number | undefined>;
  recordRun(name: string, tick: number): Promise<void>;
}

/** A ledger in this process: enough for replicas that share one process (tests, the memory backend). */
export function memoryLedger(): SingletonLedger {
  const runs = new Map<string, number>();
  return {
    lastRun: async (name) => runs.get(name),
    recordRun: async (name, tick) => {
      runs.set(name, Math.max(tick, runs.get(name) ?? Number.NEGATIVE_INFINITY));
    },
  };
}

/** Options of {@link runSingleton}: its schedule (`everyMs` or `cron`) and its lock. */
export interface SingletonOptions {
  /** Run every this many ms, on multiples of it since the epoch (the same ticks on every replica). */
  everyMs?: number;
  /** Or a cron expression (croner syntax, seconds optional). */
  cron?: string;
  /** ShedLock's lockAtMostFor: the lock's lease, so a crashed runner frees the job. Default: the period. */
  lockAtMostForMs?: number;
  /**
   * ShedLock's lockAtLeastFor: the winner keeps the lock this long after the tick even if the job
   * was quicker, so that a replica whose clock or timer is late finds the tick taken instead of
   * running it again. Default: 90 % of the period. Replicas' clocks must agree closer than that.
   */
  lockAtLeastForMs?: number;
  ledger?: SingletonLedger;
  /** Identity shown as the lock's owner. Default `<hostname>/<pid>`. */
  replica?: string;
  signal?: AbortSignal;
  onRun?: (run: { tick: Date; term: bigint; replica: string }) => void;
  /** A tick that no replica ran (found by the winner of a later tick through the ledger). */
  onMissed?: (tick: Date) => void;
  onError?: (error: unknown, tick: Date) => void;
  /**
   * This replica's wall clock (epoch ms). Default Date.now. Ticks are computed from it, so replicas
   * whose clocks disagree fire apart: the lock and the ledger still give each tick one run.
   */
  clock?: () => number;
}

/**
 * Runs job on exactly one replica per tick: every replica tries the job's lock at the tick, the
 * winner runs the job and keeps the lock until lockAtLeastFor has passed; the others skip. The
 * winner also checks the ledger and reports ticks that nobody ran (all replicas down is a fault
 * too). Resolves when signal aborts; rejects with the {@link AuthenticationError} (`AUTH_FAILED`) of
 * a tick the backend refused, which every later tick would meet too.
 */
export async function runSingleton(
  provider: LockProvider,
  name: string,
  job: (run: SingletonJob) => Promise<void>,
  options: SingletonOptions,
): Promise<void> {
  const schedule = scheduleOf(options);
  const lockAtMostForOption =
    options.lockAtMostForMs === undefined
      ? undefined
      : validateTtlMs(options.lockAtMostForMs, 'lockAtMostForMs');
  if (
    options.lockAtLeastForMs !== undefined &&
    !(Number.isFinite(options.lockAtLeastForMs) && options.lockAtLeastForMs >= 0)
  ) {
    throw new InvalidArgumentError(
      'lockAtLeastForMs',
      `expected 0 or more ms, got ${options.lockAtLeastForMs}`,
    );
  }
  const ledger = options.ledger ?? defaultLedger;
  const now = options.clock ?? Date.now;
  const replica = options.replica ?? `${hostname()}/${process.pid}`;
  const signal = options.signal;
  const telemetry = telemetryOf(provider, () => new ProviderEvents());
  while (!signal?.aborted) {
    const tick = schedule.next(now());
    if (!Number.isFinite(tick)) return; // a cron with no future run
    const wait = await sleepUnlessWoken(Math.max(0, tick - now()), signal).done.catch(() => 'aborted');
    if (wait === 'aborted' || signal?.aborted) return;
    const period = schedule.periodAt(tick);
    // The lease only covers a crashed runner (a held lock is renewed): no longer than a lease may be,
    // so weekly jobs and 25-hour DST days run.
    const lockAtMostFor = lockAtMostForOption ?? Math.min(Math.max(period, MIN_TTL_MS), MAX_TTL_MS);
    const lockAtLeastFor = options.lockAtLeastForMs ?? Math.floor(period * 0.9);
    let lock: Awaited<ReturnType<LockProvider['tryAcquire']>>;
    try {
      lock = await provider.tryAcquire(name, {
        ttlMs: lockAtMostFor,
        owner: `${replica} tick ${new Date(tick).toISOString()}`,
      });
    } catch (error) {
      // Refused credentials or certificates fail every tick alike: stop and say so.
      if (error instanceof AuthenticationError) throw error;
      options.onError?.(error, new Date(tick));
      continue;
    }
    if (!lock) continue; // another replica has this tick
    // The job stops when the lock is lost or the runner is stopped, whichever comes first.
    const run = linkSignals([lock.signal, signal]);
    let counted = false; // a throwing onRun is not a second, failed run
    try {
      const last = await ledger.lastRun(name);
      // A replica whose timer fired late finds the lock free again: the ledger says the tick ran.
      if (last !== undefined && last >= tick) continue;
      if (last !== undefined) {
        // At most MAX_MISSED_REPORTED: after a long outage the count matters, not every tick.
        let missed = schedule.next(last);
        for (let n = 0; missed < tick && n < MAX_MISSED_REPORTED; n++, missed = schedule.next(missed)) {
          telemetry.singletonMissed(name, new Date(missed));
          options.onMissed?.(new Date(missed));
        }
      }
      if (run.signal.aborted) continue; // lost before it began: not this replica's run
      await job({ signal: run.signal, term: lock.fencingToken, tick: new Date(tick) });
      await ledger.recordRun(name, tick);
      telemetry.singletonRan(name, new Date(tick));
      counted = true;
      options.onRun?.({ tick: new Date(tick), term: lock.fencingToken, replica });
    } catch (error) {
      if (!counted) telemetry.singletonRan(name, new Date(tick), error);
      options.onError?.(error, new Date(tick));
    } finally {
      // The run is over: a signal the job kept (a write it left running) must not read live on.
      run.abort(new Error('the run ended'));
      run.dispose();
      const holdUntil = tick + lockAtLeastFor;
      await sleepUnlessWoken(Math.max(0, holdUntil - now()), signal).done.catch(() => undefined);
      await lock.release().catch(() => undefined);
    }
  }
}

const defaultLedger = memoryLedger();
const MAX_MISSED_REPORTED = 1_000;

interface Schedule {
  /** The first tick strictly after `after` (epoch ms). */
  next(after: number): number;
  /** The length of the period that starts at tick. */
  periodAt(tick: number): number;
}

function scheduleOf(options: SingletonOptions): Schedule {
  if ((options.everyMs === undefined) === (options.cron === undefined)) {
    throw new InvalidArgumentError('schedule', 'give exactly one of everyMs or cron');
  }
  if (options.everyMs !== undefined) {
    const every = options.everyMs;
    if (!(Number.isFinite(every) && every >= MIN_TTL_MS && every <= Number.MAX_SAFE_INTEGER)) {
      throw new InvalidArgumentError('everyMs', `at least ${MIN_TTL_MS} ms (the shortest lease)`);
    }
    return { next: (after) => (Math.floor(after / every) + 1) * every, periodAt: () => every };
  }
  let cron: Cron;
  try {
    cron = new Cron(options.cron as string, { paused: true });
  } catch (error) {
    throw new InvalidArgumentError('cron', (error as Error).message);
  }
  const next = (after: number) => cron.nextRun(new Date(after))?.getTime() ?? Number.POSITIVE_INFINITY;
  return { next, periodAt: (tick) => next(tick) - tick };
}
