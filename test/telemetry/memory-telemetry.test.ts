import { readFileSync } from 'node:fs';
import { createNoopMeter, metrics } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createElection,
  LockTimeoutError,
  METRIC_NAMES,
  MemoryLockProvider,
  type ProviderEventMap,
  runSingleton,
  type SingletonLedger,
} from '../../src/index.js';
import { Redactor, secretsIn } from '../../src/telemetry/redact.js';
import { MemoryLockServer, uniqueKey } from '../../src/testing/index.js';
import { testMetrics } from './metric-reader.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits (bounded) until cond holds; the caller's expect says what was wanted. */
async function until(cond: () => boolean, limitMs = 5_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!cond() && Date.now() < end) await sleep(5);
}

function recordEvents(provider: MemoryLockProvider) {
  const recorded = ['grant', 'loss', 'renew-failed', 'release'] as const;
  type Recorded = (typeof recorded)[number];
  const seen: Array<{ event: Recorded; payload: ProviderEventMap[Recorded] }> = [];
  for (const event of recorded) {
    provider.on(event, (payload) => seen.push({ event, payload }));
  }
  return seen;
}

function recordingLogger() {
  const lines: Array<{ level: string; args: unknown[] }> = [];
  const at =
    (level: string) =>
    (...args: unknown[]) =>
      lines.push({ level, args });
  return { lines, logger: { info: at('info'), warn: at('warn'), error: at('error') } };
}

const providers: MemoryLockProvider[] = [];
function memory(options: ConstructorParameters<typeof MemoryLockProvider>[0]): MemoryLockProvider {
  const provider = new MemoryLockProvider({ server: new MemoryLockServer(), ...options });
  providers.push(provider);
  return provider;
}
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

describe('metrics and events on the memory provider', () => {
  it('a grant and its release: wait, held, hold time, losses{released}, grant and release events', async () => {
    const { meterProvider, collect } = testMetrics();
    const provider = memory({ meterProvider });
    const events = recordEvents(provider);
    const lock = await provider.acquire('orders', { owner: 'worker-1' });
    let snap = await collect();
    expect(snap.total(METRIC_NAMES.held, { backend: 'memory', kind: 'lock' })).toBe(1);
    expect(snap.total(METRIC_NAMES.waitDuration, { outcome: 'granted' })).toBe(1);
    expect(snap.descriptor(METRIC_NAMES.waitDuration)?.unit).toBe('s');
    await sleep(30);
    const [oldest] = (await collect()).points(METRIC_NAMES.oldestHold);
    expect(oldest?.attributes).toEqual({ backend: 'memory', kind: 'lock' });
    expect(oldest?.value).toBeGreaterThanOrEqual(0.02);
    await lock.release();
    snap = await collect();
    expect(snap.total(METRIC_NAMES.held)).toBe(0);
    expect(snap.total(METRIC_NAMES.holdDuration, { reason: 'released' })).toBe(1);
    expect(snap.descriptor(METRIC_NAMES.holdDuration)?.unit).toBe('s');
    expect(snap.total(METRIC_NAMES.losses, { reason: 'released' })).toBe(1);
    expect(events.map((e) => e.event)).toEqual(['grant', 'release']);
    expect(events[0]?.payload).toEqual({
      backend: 'memory',
      key: 'orders',
      owner: 'worker-1',
      fencingToken: lock.fencingToken,
    });
    // Without the opt-in, no series per name.
    expect(snap.points(METRIC_NAMES.losses).every((p) => !('name' in p.attributes))).toBe(true);
  });

  it('waiters while waiting, then timeout, busy and aborted outcomes', async () => {
    const { meterProvider, collect } = testMetrics();
    const provider = memory({ meterProvider });
    const held = await provider.acquire('k');
    const waiting = provider.acquire('k', { waitMs: 300 });
    await sleep(50);
    expect((await collect()).total(METRIC_NAMES.waiters)).toBe(1);
    await expect(waiting).rejects.toBeInstanceOf(LockTimeoutError);
    expect(await provider.tryAcquire('k')).toBeNull();
    const abort = new AbortController();
    const aborted = provider.acquire('k', { signal: abort.signal });
    await sleep(20);
    abort.abort();
    await expect(aborted).rejects.toThrow();
    const snap = await collect();
    expect(snap.total(METRIC_NAMES.waiters)).toBe(0);
    expect(snap.total(METRIC_NAMES.waitDuration, { outcome: 'timeout' })).toBe(2);
    expect(snap.total(METRIC_NAMES.waitDuration, { outcome: 'aborted' })).toBe(1);
    expect(snap.total(METRIC_NAMES.waitDuration, { outcome: 'granted' })).toBe(1);
    await held.release();
  });

  it('renewals are counted; a partition gives renew-failed, then a loss "unconfirmed", logged', async () => {
    const { meterProvider, collect } = testMetrics();
    const { lines, logger } = recordingLogger();
    const provider = memory({ meterProvider, logger, ttlMs: 150 });
    const events = recordEvents(provider);
    const lock = await provider.acquire('job');
    await until(() => false, 200); // two renewals at ttl/3
    expect((await collect()).total(METRIC_NAMES.renewals, { outcome: 'renewed' })).toBeGreaterThanOrEqual(1);
    provider.simulate.partition(true);
    await until(() => lock.signal.aborted);
    provider.simulate.partition(false);
    const snap = await collect();
    expect(lock.held).toBe(false);
    expect(snap.total(METRIC_NAMES.renewals, { outcome: 'failed' })).toBeGreaterThanOrEqual(1);
    expect(snap.total(METRIC_NAMES.renewalDuration)).toBeGreaterThanOrEqual(2);
    expect(snap.total(METRIC_NAMES.losses, { reason: 'unconfirmed' })).toBe(1);
    expect(snap.total(METRIC_NAMES.held)).toBe(0);
    const names = events.map((e) => e.event);
    expect(names[0]).toBe('grant');
    expect(names).toContain('renew-failed');
    expect(names.at(-1)).toBe('loss');
    expect(events.at(-1)?.payload).toMatchObject({ key: 'job', reason: 'unconfirmed' });
    expect(lines.some((l) => l.level === 'warn' && String(l.args[1]).includes('lost: unconfirmed'))).toBe(
      true,
    );
    expect(lines.some((l) => l.level === 'warn' && String(l.args[1]).includes('renewing lock "job"'))).toBe(
      true,
    );
    await lock.release();
    // One end per grant: the later release is neither a second loss nor a release event.
    expect(events.filter((e) => e.event === 'release')).toHaveLength(0);
  });

  it('semaphore permits count as grants of kind "semaphore" with the same events', async () => {
    const { meterProvider, collect } = testMetrics();
    const provider = memory({ meterProvider });
    const events = recordEvents(provider);
    const semaphore = provider.semaphore('pool', { limit: 2 });
    const a = await semaphore.acquire();
    const b = await semaphore.acquire();
    expect(await semaphore.tryAcquire()).toBeNull();
    let snap = await collect();
    expect(snap.total(METRIC_NAMES.held, { kind: 'semaphore' })).toBe(2);
    expect(snap.total(METRIC_NAMES.waitDuration, { kind: 'semaphore', outcome: 'timeout' })).toBe(1);
    await a.release();
    await b.release();
    snap = await collect();
    expect(snap.total(METRIC_NAMES.held, { kind: 'semaphore' })).toBe(0);
    expect(snap.total(METRIC_NAMES.losses, { kind: 'semaphore', reason: 'released' })).toBe(2);
    expect(events.map((e) => `${e.event}:${e.payload.key}`)).toEqual([
      'grant:pool',
      'grant:pool',
      'release:pool',
      'release:pool',
    ]);
  });

  it('election terms, and a failover when a term is lost rather than resigned', async () => {
    const { meterProvider, collect } = testMetrics();
    const provider = memory({ meterProvider, ttlMs: 150 });
    const election = createElection(provider, 'controller');
    const first = await election.campaign('node-a');
    await first.resign();
    let snap = await collect();
    expect(snap.total(METRIC_NAMES.electionTerms, { kind: 'election' })).toBe(1);
    expect(snap.total(METRIC_NAMES.electionFailovers)).toBe(0);
    const second = await election.campaign('node-a');
    provider.simulate.partition(true);
    await until(() => second.signal.aborted);
    provider.simulate.partition(false);
    snap = await collect();
    expect(second.signal.aborted).toBe(true);
    expect(snap.total(METRIC_NAMES.electionTerms)).toBe(2);
    expect(snap.total(METRIC_NAMES.electionFailovers)).toBe(1);
    await second.resign();
  });

  it('singleton runs by outcome and missed ticks', async () => {
    const { meterProvider, collect } = testMetrics();
    const { lines, logger } = recordingLogger();
    const provider = memory({ meterProvider, logger });
    const every = 100;
    // The ledger says the last run was 5 ticks ago: the winner of the next tick reports the gap.
    let last: number | undefined = (Math.floor(Date.now() / every) - 5) * every;
    const ledger: SingletonLedger = {
      lastRun: async () => last,
      recordRun: async (_name, tick) => {
        last = tick;
      },
    };
    const stop = new AbortController();
    let runs = 0;
    const running = runSingleton(
      provider,
      'nightly',
      async () => {
        runs += 1;
        if (runs === 2) throw new Error('job failed');
        if (runs >= 3) stop.abort();
      },
      { everyMs: every, ledger, signal: stop.signal, lockAtLeastForMs: 0 },
    );
    await until(() => stop.signal.aborted, 5_000);
    stop.abort();
    await running;
    const snap = await collect();
    expect(runs).toBe(3);
    expect(snap.total(METRIC_NAMES.singletonRuns, { kind: 'singleton', outcome: 'ok' })).toBe(2);
    expect(snap.total(METRIC_NAMES.singletonRuns, { outcome: 'error' })).toBe(1);
    // The tick after the failed one was not recorded as run: at least the initial gap of 4.
    expect(snap.total(METRIC_NAMES.singletonMissed)).toBeGreaterThanOrEqual(4);
    expect(lines.some((l) => l.level === 'error' && String(l.args[1]).includes('job failed'))).toBe(true);
    expect(lines.some((l) => l.level === 'warn' && String(l.args[1]).includes('no replica ran'))).toBe(true);
  });

  it('the name attribute only when asked for', async () => {
    const { meterProvider, collect } = testMetrics();
    const provider = memory({ meterProvider, metricsNameAttribute: true });
    await (await provider.acquire('invoice-42')).release();
    const snap = await collect();
    expect(snap.total(METRIC_NAMES.losses, { name: 'invoice-42', reason: 'released' })).toBe(1);
  });

  it('takes the global MeterProvider as it is when the provider is created, not at import', async () => {
    const { meterProvider, collect } = testMetrics();
    expect(metrics.setGlobalMeterProvider(meterProvider)).toBe(true);
    try {
      const provider = memory({});
      await (await provider.acquire('late-setup')).release();
      expect((await collect()).total(METRIC_NAMES.losses, { reason: 'released' })).toBe(1);
    } finally {
      metrics.disable();
    }
  });

  it('a listener or a logger that throws breaks nothing', async () => {
    const provider = memory({
      logger: {
        info: () => {
          throw new Error('logger down');
        },
        warn: () => {
          throw new Error('logger down');
        },
        error: () => {
          throw new Error('logger down');
        },
      },
    });
    let warned = 0;
    const onWarning = () => {
      warned += 1;
    };
    process.on('warning', onWarning);
    try {
      provider.on('grant', () => {
        throw new Error('listener bug');
      });
      const lock = await provider.acquire('k');
      expect(lock.held).toBe(true);
      await lock.release();
      await sleep(10);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warned).toBe(1);
  });
});

describe('no secrets in log lines and events', () => {
  it('a URL password in an owner text is masked in the grant event and the loss log line', async () => {
    const { lines, logger } = recordingLogger();
    const provider = memory({ logger, ttlMs: 150 });
    const events = recordEvents(provider);
    const lock = await provider.acquire('k', { owner: 'job via postgres://app:Sup3r-Secret@db:5432/x' });
    provider.simulate.partition(true);
    await until(() => lock.signal.aborted);
    provider.simulate.partition(false);
    expect(lock.held).toBe(false);
    const everything = JSON.stringify([events, lines], (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    expect(everything).toContain('postgres://app:***@db:5432/x');
    expect(everything).not.toContain('Sup3r-Secret');
    expect(lines.length).toBeGreaterThanOrEqual(2);
  });

  it('credentials found in options (ZooKeeper digest, etcd auth, URLs) are masked in messages and errors', () => {
    const secrets = secretsIn({
      digest: 'alice:zk-Digest-Pw',
      auth: { username: 'root', password: 'etcd-Root-Pw' },
      connectionString: 'postgres://u:p%40ss-Word9@h/db',
      redis: { password: 'redis-Pw-77' },
    });
    const redactor = new Redactor(secrets);
    const message =
      'auth alice:zk-Digest-Pw failed; etcd-Root-Pw rejected; p@ss-Word9 and p%40ss-Word9; redis-Pw-77';
    const masked = redactor.text(message);
    for (const secret of ['zk-Digest-Pw', 'etcd-Root-Pw', 'p@ss-Word9', 'p%40ss-Word9', 'redis-Pw-77']) {
      expect(masked).not.toContain(secret);
    }
    const error = Object.assign(new Error(message), { code: 'AUTH' });
    const safe = redactor.error(error) as Error & { code: string };
    expect(safe.message).toBe(masked);
    expect(safe.code).toBe('AUTH');
    const harmless = new Error('timeout');
    expect(redactor.error(harmless)).toBe(harmless);
  });
});

describe('the instrumentation scope', () => {
  it("is the package's name and version", async () => {
    const scopes: unknown[][] = [];
    const getMeter = (...scope: unknown[]) => {
      scopes.push(scope);
      return createNoopMeter();
    };
    const provider = memory({ meterProvider: { getMeter } as never });
    await (await provider.acquire(uniqueKey('scope'))).release(); // the meter is taken at first use
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(scopes.length).toBeGreaterThan(0);
    for (const scope of scopes) expect(scope).toEqual(['fencekit', version]);
  });
});

describe('a broken metrics SDK', () => {
  it('instruments that throw cost the metrics, never a grant, a release or a lease', async () => {
    const broken = () => {
      throw new Error('meter broke');
    };
    const instrument = { add: broken, record: broken, addCallback: broken, removeCallback: broken };
    const meter = new Proxy({}, { get: () => () => instrument });
    const provider = memory({ meterProvider: { getMeter: () => meter } as never, ttlMs: 300 });
    const lock = await provider.tryAcquire(uniqueKey('broken-meter'));
    expect(lock?.held).toBe(true);
    await sleep(700); // two lease periods: renewals (which report) must go on
    expect(lock?.held).toBe(true);
    await lock?.release();
    expect(await provider.inspect(lock?.key ?? '')).toBeNull();
  });
});
