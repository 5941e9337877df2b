import { describe } from 'vitest';
import { ALL_WORKLOADS, itRunsEveryWorkload, without } from './every-workload.js';

describe('torture suite: every workload (memory, Redis, PostgreSQL)', () => {
  itRunsEveryWorkload([
    ['memory', 6, without('cli')],
    ['redis', 10, ALL_WORKLOADS],
    ['postgres', 10, ALL_WORKLOADS],
  ]);
});
