import { cliWorkload } from './cli.js';
import { electionWorkload } from './election.js';
import { facadesWorkload } from './facades.js';
import { idempotencyWorkload } from './idempotency.js';
import { lockWorkload } from './lock.js';
import { readWriteWorkload } from './read-write.js';
import { semaphoreWorkload } from './semaphore.js';
import type { Workload, WorkloadName } from './workload.js';

/** Every workload the runner knows; a name without an entry is not built yet. */
export const WORKLOADS: Partial<Record<WorkloadName, Workload>> = {
  lock: lockWorkload,
  semaphore: semaphoreWorkload,
  'read-write': readWriteWorkload,
  election: electionWorkload,
  facades: facadesWorkload,
  idempotency: idempotencyWorkload,
  cli: cliWorkload,
};

export function workload(name: string): Workload {
  const found = WORKLOADS[name as WorkloadName];
  if (!found) throw new Error(`unknown workload ${name}; one of ${Object.keys(WORKLOADS).join(', ')}, all`);
  return found;
}
