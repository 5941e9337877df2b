import { afterEach, describe, it } from 'vitest';
import { MemoryLockProvider } from '../../src/index.js';
import { describeConformance, MemoryLockServer } from '../../src/testing/index.js';

const server = new MemoryLockServer();
const asMemory = (p: unknown) => p as MemoryLockProvider;

describeConformance(
  {
    name: 'memory',
    createProvider: async () => new MemoryLockProvider({ server }),
    ttlMs: 300,
    holderDeathBoundMs: 300 + 200,
    fifo: true,
    queue: 'owners',
    wakeups: () => server.wakeups,
    lockDelay: true,
    faults: {
      crash: async (p) => asMemory(p).simulate.crash(),
      partition: async (p, cut) => asMemory(p).simulate.partition(cut),
    },
  },
  { describe, it, afterEach },
);
