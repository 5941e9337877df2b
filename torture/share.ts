import type { TortureEvent } from './history.js';
import type { WorkloadName } from './workloads/workload.js';

/** The events of `history` that workload `name`'s checker judges (see belongsTo). */
export function shareOf(
  history: readonly TortureEvent[],
  name: WorkloadName,
  workloadOf: ReadonlyMap<string, WorkloadName>,
): TortureEvent[] {
  return history.filter((e) => belongsTo(e, name, workloadOf));
}

/**
 * A workload's share of the history: its workers' events, its own leftovers, and the faults that
 * could touch it: those on the servers and those aimed at its own workers. A fault aimed at another
 * workload's worker excuses nothing here (it held none of this workload's grants or requests).
 */
export function belongsTo(
  event: TortureEvent,
  name: WorkloadName,
  workloadOf: ReadonlyMap<string, WorkloadName>,
): boolean {
  if (event.type === 'fault') return !event.workers || event.workers.some((w) => workloadOf.get(w) === name);
  if (event.type === 'leftover' || event.type === 'final') return event.workload === name;
  return workloadOf.get(event.worker) === name;
}
