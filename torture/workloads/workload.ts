import type { LockProvider } from 'fencekit';
import type { CheckOptions, CheckResult } from '../checker.js';
import type { TortureBackend } from '../cluster.js';
import type { TortureEvent } from '../history.js';
import type { HolderFaults } from '../holder-faults.js';
import type { StallSwitch } from '../stall.js';
import type { FencedStorage } from '../storage.js';
import type { WorkerConfig } from '../worker.js';

export type WorkloadName =
  | 'lock'
  | 'semaphore'
  | 'read-write'
  | 'election'
  | 'idempotency'
  | 'cli'
  | 'facades';

export const WORKLOAD_NAMES: readonly WorkloadName[] = [
  'lock',
  'semaphore',
  'read-write',
  'election',
  'idempotency',
  'cli',
  'facades',
];

/** What a workload's loop gets inside a worker (a forked process, or in-process for memory://). */
export interface WorkerContext {
  config: WorkerConfig;
  emit: (event: TortureEvent) => void;
  /** Aborts when the worker is asked to stop: end the loop, close what was opened. */
  stop: AbortSignal;
  /** The seeded random source of this worker. */
  random: () => number;
  /** The protected storage (fenced unless the run is a control run with fencing off). */
  storage: FencedStorage;
  /** The nemesis's stall switch (see stall.ts); a workload that calls acquire() through stallingProvider honours it. */
  stalls: StallSwitch;
  /** Forked workers of a workload whose holder is a child process: the faults aimed at it. */
  holder?: HolderFaults;
  /** memory:// in-process workers: hands the runner the real provider (partition, crash). */
  onProvider?: (provider: LockProvider) => void;
}

/** What the runner gives a workload's leftover check: a provider on the run's backend. */
export interface LeftoverContext {
  provider: LockProvider;
  url: string;
  storageUrl: string;
  backend: TortureBackend;
  /** Records what the check needs of the end state (a key's final effect row): not a leftover. */
  record(event: TortureEvent): void;
}

/**
 * One recipe driven under the nemesis: the loop its workers run, the promises its checker holds
 * it to, and the control variants (--unsafe) that must make that checker go red.
 */
export interface Workload {
  readonly name: WorkloadName;
  /** Backends that have the recipe; a run of another backend skips the workload. */
  readonly backends: readonly TortureBackend[];
  /**
   * The lock holder is a process the worker starts (cli: `fencekit lock`), not the worker: the
   * nemesis's freeze and kill go to that process (the worker applies them and survives a kill).
   */
  readonly holderIsChild?: boolean;
  /** The --unsafe variants this workload knows, each breaking one of its promises on purpose. */
  readonly unsafe: readonly string[];
  /** Storage rows the protected storage needs (the names its workers write under). */
  readonly storageKeys: readonly string[];
  /** The mode of the i-th worker of this workload (e.g. lock: one in four leads). */
  mode(index: number): string;
  /** The worker's loop: runs until ctx.stop aborts, then closes what it opened. */
  run(ctx: WorkerContext): Promise<void>;
  /** After every worker stopped: anything of the workload still held, as leftover events. */
  leftovers(ctx: LeftoverContext): Promise<string[]>;
  /** The verdict on this workload's share of the history (its workers' events, faults, leftovers). */
  check(events: readonly TortureEvent[], options: CheckOptions): CheckResult;
}
