import type { LockProvider } from 'fencekit';
import type { TortureEvent } from './history.js';
import type { HolderFaults } from './holder-faults.js';
import { seeded } from './random.js';
import { StallSwitch } from './stall.js';
import { FencedStorage } from './storage.js';
import { workload } from './workloads/index.js';
import type { WorkloadName } from './workloads/workload.js';

export interface WorkerConfig {
  id: string;
  /** The recipe this worker drives (see workloads/). */
  workload: WorkloadName;
  /** The workload's own variant for this worker (lock: 'lock' or 'leader'). */
  mode: string;
  url: string;
  /** Passed to connect(): ttlMs, callTimeoutMs … */
  connectOptions: Record<string, unknown>;
  storageUrl: string;
  fencing: boolean;
  seed: number;
  /** Longest critical section, ms (random 0..max). */
  criticalMaxMs: number;
  /** Control runs only: the workload breaks one of its promises on purpose (see its `unsafe`). */
  unsafe?: string;
}

export type Emit = (event: TortureEvent) => void;

/** One worker: its workload's loop, recording every step, until `stop` aborts. */
export async function runWorker(
  config: WorkerConfig,
  emit: Emit,
  stop: AbortSignal,
  onProvider?: (provider: LockProvider) => void,
  stalls: StallSwitch = new StallSwitch(),
  holder?: HolderFaults,
): Promise<void> {
  const storage = new FencedStorage(config.storageUrl, config.fencing);
  try {
    await workload(config.workload).run({
      config,
      emit,
      stop,
      random: seeded(config.seed),
      storage,
      stalls,
      ...(holder ? { holder } : {}),
      ...(onProvider ? { onProvider } : {}),
    });
  } finally {
    await storage.close();
  }
}
