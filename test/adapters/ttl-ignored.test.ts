import { describe, expect, it } from 'vitest';
import type { TtlIgnored } from '../../src/events.js';
import type { LockProvider } from '../../src/index.js';
import { MemoryLockProvider } from '../../src/memory/provider.js';
import { MemoryLockServer } from '../../src/memory/server.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { postgresFixture } from '../servers/postgres-fixture.js';
import { zookeeperFixture } from '../servers/zookeeper-fixture.js';

/** A provider with events and semaphores (every built-in one). */
type FullProvider = LockProvider & Required<Pick<LockProvider, 'on' | 'semaphore'>>;

/** A logger that keeps its warn lines, and the provider's 'ttl-ignored' events. */
function watch(provider: FullProvider, logger: { warnings: unknown[][] }) {
  const events: TtlIgnored[] = [];
  provider.on('ttl-ignored', (event) => events.push(event));
  return { events, warnings: logger.warnings };
}

function recordingLogger() {
  const warnings: unknown[][] = [];
  return {
    warnings,
    logger: {
      info: () => undefined,
      warn: (...args: unknown[]) => warnings.push(args),
      error: () => undefined,
    },
  };
}

/** Many acquires and a permit, all with ttlMs (or none): released one after the other. */
async function acquireMany(provider: FullProvider, ttlMs: number | undefined): Promise<void> {
  const options = ttlMs === undefined ? {} : { ttlMs };
  for (let i = 0; i < 5; i++) {
    const lock = await provider.acquire(uniqueKey('ttl-ignored'), options);
    await lock.release();
  }
  const permit = await provider.semaphore(uniqueKey('ttl-ignored-sem'), { limit: 2 }).acquire(options);
  await permit.release();
}

describe('ZooKeeper: a ttlMs is not used, and said so once', () => {
  const { open } = zookeeperFixture({ sessionTimeoutMs: 2_000, serverTickMs: 200 }); // the test servers' tickTime

  it('many acquires with ttlMs: one warning and one event, naming the session timeout', async () => {
    const { logger, ...log } = recordingLogger();
    const provider = open({ logger });
    const seen = watch(provider, log);
    await acquireMany(provider, 5_000);
    await acquireMany(provider, 7_000);
    expect(seen.events).toEqual([
      {
        backend: 'zookeeper',
        ttlMs: 5_000,
        governedBy: 'sessionTimeoutMs',
        boundMs: await provider.sessionTimeoutMs(),
      },
    ]);
    expect(seen.warnings).toHaveLength(1);
    expect(String(seen.warnings[0]?.[1])).toMatch(/ttlMs \(5000 ms\) is not used by the zookeeper backend/);
  });

  it('no warning without ttlMs, nor for a ttlMs equal to the session timeout', async () => {
    const { logger, ...log } = recordingLogger();
    const provider = open({ logger });
    const seen = watch(provider, log);
    await acquireMany(provider, undefined);
    await acquireMany(provider, await provider.sessionTimeoutMs());
    expect(seen.events).toEqual([]);
    expect(seen.warnings).toEqual([]);
  });
});

describe('PostgreSQL: a ttlMs is not used, and said so once', () => {
  const pg = postgresFixture();

  it('many acquires with ttlMs: one warning and one event, naming the server keepalive', async () => {
    const { logger, ...log } = recordingLogger();
    const provider = pg.open({ logger, serverKeepalive: { idle: 4, interval: 2, count: 3 } });
    const seen = watch(provider, log);
    await acquireMany(provider, 5_000);
    await acquireMany(provider, 7_000);
    expect(seen.events).toEqual([
      { backend: 'postgres', ttlMs: 5_000, governedBy: 'serverKeepalive', boundMs: 10_000 },
    ]);
    expect(seen.warnings).toHaveLength(1);
  });

  it('no warning without ttlMs', async () => {
    const { logger, ...log } = recordingLogger();
    const provider = pg.open({ logger });
    const seen = watch(provider, log);
    await acquireMany(provider, undefined);
    expect(seen.events).toEqual([]);
    expect(seen.warnings).toEqual([]);
  });

  it('a ttlMs in the provider’s options counts; without a logger the warning goes to the process', async () => {
    const warned: Error[] = [];
    const onWarning = (warning: Error) => {
      if (warning.name === 'FencekitWarning') warned.push(warning);
    };
    process.on('warning', onWarning);
    try {
      const provider = pg.open({ ttlMs: 30_000 });
      const events: TtlIgnored[] = [];
      provider.on('ttl-ignored', (event) => events.push(event));
      await acquireMany(provider, undefined);
      await eventually('the process warning', async () => warned.length > 0, 2_000);
      expect(events).toEqual([
        { backend: 'postgres', ttlMs: 30_000, governedBy: 'serverKeepalive', boundMs: 25_000 },
      ]);
      expect(warned.map((w) => (w as Error & { code?: string }).code)).toEqual(['FENCEKIT_TTL_IGNORED']);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('backends with per-lock leases honour ttlMs: nothing to say', () => {
  it('memory', async () => {
    const { logger, ...log } = recordingLogger();
    const provider = new MemoryLockProvider({ server: new MemoryLockServer(), logger });
    const seen = watch(provider, log);
    await acquireMany(provider, 5_000);
    expect(seen.events).toEqual([]);
    expect(seen.warnings).toEqual([]);
    await provider.close();
  });
});
