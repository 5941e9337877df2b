import { afterEach, describe, it } from 'vitest';
import { MemoryLockProvider } from '../../src/index.js';
import { describeReadWriteConformance, MemoryLockServer } from '../../src/testing/index.js';

const server = new MemoryLockServer();

describeReadWriteConformance(
  {
    name: 'memory',
    createProvider: async () => new MemoryLockProvider({ server }),
    ttlMs: 300,
    holderDeathBoundMs: 300 + 200,
    lockDelay: true,
    faults: {
      crash: async (p) => (p as MemoryLockProvider).simulate.crash(),
      partition: async (p, cut) => (p as MemoryLockProvider).simulate.partition(cut),
    },
    callTimeoutMs: 5_000,
  },
  { describe, it, afterEach },
);
