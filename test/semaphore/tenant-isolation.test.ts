import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, createTenantLimiter, type LockProvider, MemoryLockProvider } from '../../src/index.js';
import { eventually, MemoryLockServer, uniqueKey } from '../../src/testing/index.js';
import { type EveryBackend, type NetworkBackend, startEveryBackend } from '../servers/index.js';

const LIMIT = 2;
const BACKLOG = 200;
const B_JOBS = 10;

type Backend = 'memory' | NetworkBackend;

/**
 * Tenant A floods the limiter with BACKLOG jobs that all stay running or waiting until the test
 * opens A's gate; tenant B's jobs must all finish before that, whatever A's backlog holds on to
 * (queue entries, connections). An ordering check, no timing: B's waitMs is only the bound of a
 * wait that would otherwise never end.
 */
async function bFinishesUnderABacklog(provider: LockProvider) {
  const prefix = `${uniqueKey('tenants')}/`;
  const limiter = createTenantLimiter(provider, { limit: LIMIT, prefix });
  let openGate: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    openGate = resolve;
  });
  const a = { started: 0, finished: 0, running: 0, peak: 0 };
  const floodA = Array.from({ length: BACKLOG }, () =>
    limiter.run(
      'A',
      async () => {
        a.started += 1;
        a.running += 1;
        a.peak = Math.max(a.peak, a.running);
        await gate;
        a.running -= 1;
        a.finished += 1;
      },
      { waitMs: 120_000 },
    ),
  );
  try {
    const semaphoreA = provider.semaphore?.(`${prefix}A`, { limit: LIMIT });
    if (!semaphoreA) throw new Error(`${provider.backend} has no semaphores`);
    await eventually(
      "A's backlog queued behind its two running jobs",
      async () => a.started === LIMIT && (await semaphoreA.inspect()).waiters > 0,
      30_000,
    );
    const b = { running: 0, peak: 0 };
    const jobsB = await Promise.allSettled(
      Array.from({ length: B_JOBS }, () =>
        limiter.run(
          'B',
          async (permit) => {
            b.running += 1;
            b.peak = Math.max(b.peak, b.running);
            await new Promise((r) => setTimeout(r, 5));
            b.running -= 1;
            return permit.fencingToken;
          },
          { waitMs: 20_000 },
        ),
      ),
    );
    const whenBWasDone = { aStarted: a.started, aFinished: a.finished };
    const failedB = jobsB.flatMap((job) => (job.status === 'rejected' ? [String(job.reason)] : []));
    openGate();
    await Promise.all(floodA);
    return {
      failedB: [...new Set(failedB)],
      whenBWasDone,
      aFinished: a.finished,
      peakA: a.peak,
      bOverLimit: b.peak > LIMIT,
    };
  } finally {
    openGate();
    await Promise.allSettled(floodA);
  }
}

describe('tenant limiter: a tenant with a backlog of 200 does not hold up another (every backend)', () => {
  let servers: EveryBackend | undefined;
  const opened: LockProvider[] = [];
  beforeAll(async () => {
    servers = await startEveryBackend();
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled(opened.map((p) => p.close()));
    await servers?.stop();
  });
  const open = async (backend: Backend): Promise<LockProvider> => {
    const provider =
      backend === 'memory'
        ? new MemoryLockProvider({ server: new MemoryLockServer() })
        : await connect((servers as EveryBackend).urls[backend]);
    opened.push(provider);
    return provider;
  };

  it.each(['memory', 'redis', 'postgres', 'etcd', 'zookeeper'] as Backend[])(
    "%s: B's jobs all finish while A's 198 waiting jobs are still waiting",
    async (backend) => {
      const outcome = await bFinishesUnderABacklog(await open(backend));
      expect(outcome).toEqual({
        failedB: [],
        // A's backlog had not moved: B went past it, not after it.
        whenBWasDone: { aStarted: LIMIT, aFinished: 0 },
        aFinished: BACKLOG,
        peakA: LIMIT,
        bOverLimit: false,
      });
    },
    180_000,
  );
});
