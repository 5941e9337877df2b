import { describe } from 'vitest';
import { ALL_WORKLOADS, itRunsEveryWorkload, without } from './every-workload.js';

describe('torture suite: every workload (etcd, ZooKeeper, Redlock)', () => {
  itRunsEveryWorkload([
    ['etcd', 12, ALL_WORKLOADS],
    ['zookeeper', 12, without('idempotency')],
    ['redlock', 10, without('idempotency', 'semaphore', 'read-write')],
  ]);
});
