import { describe, expect, it } from 'vitest';
import { type Lock, MemoryLockProvider, memoryLedger, runAsLeader, runSingleton } from '../../src/index.js';
import { MemoryLockServer } from '../../src/testing/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until check holds; fails after 20 s (a condition, not a duration, is what a test waits for). */
async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met within 20 s');
    await sleep(20);
  }
}

describe('runAsLeader over the memory provider', () => {
  it('five candidates: one live term at a time, terms rise, every term ends demoted', async () => {
    const server = new MemoryLockServer();
    const stop = new AbortController();
    const live = new Set<AbortSignal>();
    const terms: bigint[] = [];
    const overlaps: bigint[] = [];
    let elected = 0;
    let demoted = 0;
    const runs = Array.from({ length: 5 }, (_, i) =>
      runAsLeader(
        new MemoryLockProvider({ server, ttlMs: 300 }),
        'controller',
        async ({ signal, term }) => {
          // Recorded, not asserted here: runAsLeader catches what fn throws (it goes to onError).
          for (const other of live) if (!other.aborted) overlaps.push(term);
          live.add(signal);
          terms.push(term);
          await sleep(20 + Math.random() * 20);
          live.delete(signal);
        },
        {
          value: `node-${i}`,
          signal: stop.signal,
          backoff: { initialMs: 5, maxMs: 20 },
          onElected: () => {
            elected += 1;
          },
          onDemoted: () => {
            demoted += 1;
          },
        },
      ),
    );
    await sleep(1_000);
    stop.abort();
    await Promise.all(runs);
    expect(overlaps, 'terms that began while another was live').toEqual([]);
    expect(terms.length).toBeGreaterThan(10);
    for (let i = 1; i < terms.length; i++) expect(terms[i]).toBeGreaterThan(terms[i - 1] as bigint);
    expect(elected).toBe(terms.length);
    expect(demoted).toBe(elected);
  });

  it('stopping the leader resigns at once: a successor leads well before the lease could expire', async () => {
    const server = new MemoryLockServer();
    const stopA = new AbortController();
    const stopB = new AbortController();
    let aLeading = false;
    const changes: Array<string | null> = [];
    const a = runAsLeader(
      new MemoryLockProvider({ server }),
      'job',
      async ({ signal }) => {
        aLeading = true;
        await new Promise((r) => signal.addEventListener('abort', r));
      },
      { value: 'a', signal: stopA.signal, ttlMs: 10_000 },
    );
    while (!aLeading) await sleep(5);
    let bElectedAt = 0;
    const b = runAsLeader(
      new MemoryLockProvider({ server }),
      'job',
      async ({ signal }) => {
        bElectedAt = performance.now();
        await new Promise((r) => signal.addEventListener('abort', r));
      },
      {
        value: 'b',
        signal: stopB.signal,
        ttlMs: 10_000,
        pollMs: 20,
        onLeaderChange: (l) => changes.push(l?.value ?? null),
      },
    );
    await sleep(50);
    const stoppedAt = performance.now();
    stopA.abort();
    await a;
    while (!bElectedAt) await sleep(5);
    expect(bElectedAt - stoppedAt).toBeLessThan(1_000); // the lease was 10 s
    await sleep(60);
    stopB.abort();
    await b;
    expect(changes).toContain('a');
    expect(changes).toContain('b');
  });

  it('backend down: failures are retried with jittered spacing behind a circuit breaker, then it recovers', async () => {
    const server = new MemoryLockServer();
    const provider = new MemoryLockProvider({ server });
    provider.simulate.partition(true);
    const errorsAt: number[] = [];
    const stop = new AbortController();
    let elected = false;
    const run = runAsLeader(
      provider,
      'svc',
      async ({ signal }) => {
        elected = true;
        await new Promise((r) => signal.addEventListener('abort', r));
      },
      {
        signal: stop.signal,
        backoff: { initialMs: 10, maxMs: 40 },
        breaker: { failures: 5, halfOpenAfterMs: 300 },
        campaignWaitMs: 20, // each campaign gives up quickly, so the failures reach the breaker
        onError: () => errorsAt.push(performance.now()),
      },
    );
    await sleep(600);
    // Five failures open the circuit; it lets one attempt through about every 300 ms.
    expect(errorsAt.length).toBeGreaterThanOrEqual(5);
    expect(errorsAt.length).toBeLessThanOrEqual(8);
    // Jitter, not a fixed beat: four gaps (two were too few: they sometimes rounded alike).
    const gaps = errorsAt.slice(1, 5).map((t, i) => t - (errorsAt[i] as number));
    expect(new Set(gaps.map((g) => Math.round(g))).size).toBeGreaterThan(1);
    provider.simulate.partition(false);
    const deadline = performance.now() + 2_000;
    while (!elected && performance.now() < deadline) await sleep(10);
    expect(elected).toBe(true);
    stop.abort();
    await run;
  });
});

describe('runSingleton over the memory provider', () => {
  it('three replicas: each tick runs at most once, and no tick goes unaccounted; ticks with every replica down are reported missed', async () => {
    // Conditions, not durations: a slow machine may make a tick late (or skip it, then report it
    // missed), never run it twice or leave it out silently.
    const server = new MemoryLockServer();
    const ledger = memoryLedger();
    const runsByTick = new Map<number, string[]>();
    const missed: number[] = [];
    const start = (stop: AbortSignal) =>
      ['r1', 'r2', 'r3'].map((replica) =>
        runSingleton(
          new MemoryLockProvider({ server }),
          'report',
          async ({ tick }) => {
            runsByTick.set(tick.getTime(), [...(runsByTick.get(tick.getTime()) ?? []), replica]);
          },
          { everyMs: 100, ledger, replica, signal: stop, onMissed: (t) => missed.push(t.getTime()) },
        ),
      );
    const first = new AbortController();
    const replicas = start(first.signal);
    await until(() => runsByTick.size >= 18);
    first.abort();
    await Promise.all(replicas);
    for (const [tick, who] of runsByTick) expect(who, `tick ${tick}`).toHaveLength(1);
    const ran = [...runsByTick.keys()].sort((a, b) => a - b);
    const accounted = new Set([...ran, ...missed]);
    for (let t = ran[0] as number; t <= (ran.at(-1) as number); t += 100)
      expect(accounted.has(t), `tick ${t} neither ran nor was reported missed`).toBe(true);

    const downFrom = Date.now();
    await sleep(350); // every replica down for at least 3 ticks
    const second = new AbortController();
    const again = start(second.signal);
    await until(() => [...runsByTick.keys()].some((t) => t > downFrom + 350));
    second.abort();
    await Promise.all(again);
    const missedWhileDown = missed.filter((t) => t > downFrom && t < downFrom + 350);
    expect(missedWhileDown.length).toBeGreaterThanOrEqual(3);
    for (const t of missed) expect(runsByTick.has(t)).toBe(false);
  });

  it('refuses a schedule that is missing, doubled or malformed', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    const job = async (_: { signal: AbortSignal; term: bigint; tick: Date; lock?: Lock }) => undefined;
    await expect(runSingleton(provider, 'x', job, {})).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(runSingleton(provider, 'x', job, { everyMs: 100, cron: '* * * * *' })).rejects.toMatchObject(
      {
        code: 'INVALID_ARGUMENT',
      },
    );
    await expect(runSingleton(provider, 'x', job, { cron: 'not a cron' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      argument: 'cron',
    });
  });
});
