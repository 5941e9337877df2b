import { describe, expect, it } from 'vitest';
import { connect, createElection } from '../../src/index.js';
import type { TortureEvent } from '../../torture/history.js';
import type { TortureReport } from '../../torture/run.js';
import { electionWorkload } from '../../torture/workloads/election.js';
import { checkFailovers, checkStaleObserves } from '../../torture/workloads/election-rules.js';
import { tortureReports } from './runner.js';

// The election workload's rules on hand-made histories (each red on a bad one, green on the good
// one), then its control runs through the built runner, and one short run on a real backend.
const NAME = 'elected';
const opts = { readWindowMs: 3_000, resignConfirmedMs: 500 };

function term(t: number, worker: string, token: number): TortureEvent {
  return {
    type: 'grant',
    t,
    worker,
    key: NAME,
    grant: `${worker}#${token}`,
    kind: 'term',
    token: String(token),
    abortedAtGrant: false,
  };
}
function seen(
  t: number,
  since: number,
  token: number | null,
  via: 'observe' | 'leader' = 'observe',
  value?: string,
) {
  return {
    type: 'observe',
    t,
    since,
    worker: 'obs',
    key: NAME,
    via,
    term: token === null ? null : String(token),
    value: token === null ? null : (value ?? `v${token}`),
  } as TortureEvent;
}
const write = (t: number, worker: string, token: number): TortureEvent => ({
  type: 'write',
  t,
  tEnd: t + 1,
  worker,
  key: NAME,
  grant: `${worker}#${token}`,
  token: String(token),
  live: true,
  result: 'accepted',
});
const rules = (events: TortureEvent[]) =>
  electionWorkload.check(events, { progressBoundMs: 10_000, ttlMs: 2_000 }).violations.map((v) => v.rule);

describe('election rules', () => {
  it('overlap and tokens: two live terms at one instant, a term below the one before', () => {
    const one = [term(0, 'a', 1), write(100, 'a', 1), term(300, 'b', 2), write(350, 'b', 2)];
    expect(rules(one)).toEqual([]);
    expect(rules([term(0, 'a', 1), term(100, 'b', 2), write(200, 'a', 1)])).toContain('overlap');
    expect(rules([term(0, 'a', 2), term(300, 'b', 1)])).toContain('tokens');
  });

  it('stale-observe: a term reported after a higher term was granted before its read began', () => {
    const history = [term(0, 'a', 1), term(1_000, 'b', 2)];
    // The read began after the previous report (since 1_500), past the successor's grant.
    expect(checkStaleObserves([...history, seen(1_600, 1_500, 1)], opts).map((v) => v.rule)).toEqual([
      'stale-observe',
    ]);
    // A read that may have begun before the successor's grant is not stale.
    expect(checkStaleObserves([...history, seen(1_600, 900, 1)], opts)).toEqual([]);
    // observe(): a read no older than the window, even when the previous report is older.
    expect(checkStaleObserves([...history, seen(4_100, 0, 1)], opts)).toHaveLength(1);
    expect(checkStaleObserves([...history, seen(3_900, 0, 1)], opts)).toEqual([]);
    // leader(): only the call's start counts.
    expect(checkStaleObserves([...history, seen(9_000, 900, 1, 'leader')], opts)).toEqual([]);
    expect(checkStaleObserves([...history, seen(1_100, 1_050, 1, 'leader')], opts)).toHaveLength(1);
    // The current term, and null, are never stale.
    expect(checkStaleObserves([...history, seen(9_000, 8_000, 2), seen(9_000, 8_000, null)], opts)).toEqual(
      [],
    );
  });

  it('stale-observe: an observer frozen within the window is judged by its previous report only', () => {
    const frozen: TortureEvent = {
      type: 'fault',
      t: 2_000,
      tEnd: 3_500,
      kind: 'pauseHolder',
      target: 'obs for 1500 ms',
      pausedWorkers: ['obs'],
    };
    const history = [term(0, 'a', 1), term(1_000, 'b', 2), frozen];
    expect(checkStaleObserves([...history, seen(4_100, 0, 1)], opts)).toEqual([]);
  });

  it('stale-observe: a confirmed resign ends the term; a slow or faulted one does not', () => {
    const resigned = (t: number, tStart: number): TortureEvent => ({
      type: 'resigned',
      t,
      tStart,
      worker: 'a',
      grant: 'a#1',
    });
    expect(checkStaleObserves([term(0, 'a', 1), resigned(500, 450), seen(700, 600, 1)], opts)).toHaveLength(
      1,
    );
    expect(checkStaleObserves([term(0, 'a', 1), resigned(1_500, 450), seen(1_700, 1_600, 1)], opts)).toEqual(
      [],
    );
    // Resigning a term already lost (its signal aborted first) does not show its key gone.
    const lost: TortureEvent = { type: 'abort', t: 300, worker: 'a', grant: 'a#1', reason: 'unconfirmed' };
    expect(checkStaleObserves([term(0, 'a', 1), lost, resigned(500, 450), seen(700, 600, 1)], opts)).toEqual(
      [],
    );
    const fault: TortureEvent = {
      type: 'fault',
      t: 0,
      tEnd: 460,
      kind: 'memberPause',
      target: 'member 0 frozen 460 ms',
      pausedWorkers: [],
    };
    expect(checkStaleObserves([term(0, 'a', 1), fault, resigned(500, 450), seen(700, 600, 1)], opts)).toEqual(
      [],
    );
  });

  it('stale-observe: a value reported after the term proclaimed a later one', () => {
    const proclaim: TortureEvent = {
      type: 'proclaim',
      t: 500,
      tStart: 480,
      worker: 'a',
      grant: 'a#1',
      key: NAME,
      value: 'a#1/p1',
    };
    const history = [term(0, 'a', 1), proclaim];
    expect(checkStaleObserves([...history, seen(700, 600, 1, 'leader', 'a/c1')], opts)).toHaveLength(1);
    expect(checkStaleObserves([...history, seen(700, 600, 1, 'leader', 'a#1/p1')], opts)).toEqual([]);
    expect(checkStaleObserves([...history, seen(700, 400, 1, 'leader', 'a/c1')], opts)).toEqual([]);
    // A proclaim that failed unrefused (a timeout) may have been applied: its value is no stale report,
    // and it replaces nothing for sure (the report of p1 after it is judged by what resolved).
    const maybe: TortureEvent = { ...proclaim, t: 900, tStart: 800, value: 'a#1/p2', unconfirmed: true };
    expect(checkStaleObserves([...history, maybe, seen(1_200, 1_100, 1, 'leader', 'a#1/p2')], opts)).toEqual(
      [],
    );
    expect(checkStaleObserves([...history, maybe, seen(1_200, 1_100, 1, 'leader', 'a#1/p1')], opts)).toEqual(
      [],
    );
  });

  it('born-lost: a term handed out aborted is excused only right after a stall of the whole process', () => {
    const bornLost = { ...term(3_400, 'a', 1), abortedAtGrant: true } as TortureEvent;
    const stall = (tEnd: number): TortureEvent => ({
      type: 'fault',
      t: 0,
      tEnd,
      kind: 'stallProcess',
      target: `everything for ${tEnd} ms`,
      pausedWorkers: ['a', 'b'],
    });
    expect(rules([bornLost])).toContain('born-lost');
    expect(rules([stall(3_390), bornLost])).not.toContain('born-lost');
    expect(rules([stall(3_100), bornLost])).toContain('born-lost');
    expect(rules([{ ...stall(3_390), kind: 'pauseHolder' } as TortureEvent, bornLost])).toContain(
      'born-lost',
    );
  });

  it('leftovers: a leader still elected after the workers stopped is reported, none after its resign', async () => {
    const url = 'memory://election-leftovers';
    const [candidate, inspector] = await Promise.all([connect(url), connect(url)]);
    try {
      const leadership = await createElection(candidate, NAME).campaign('stayed');
      const context = {
        provider: inspector,
        url,
        storageUrl: '',
        backend: 'memory' as const,
        record: () => undefined,
      };
      expect((await electionWorkload.leftovers(context)).join('\n')).toContain('stayed');
      await leadership.resign();
      expect(await electionWorkload.leftovers(context)).toEqual([]);
    } finally {
      await Promise.all([candidate.close(), inspector.close()]);
    }
  });

  it('failover: a killed leader is followed by a higher term within the bound', () => {
    const bound = { boundMs: 10_000, recoveryMs: 4_000 };
    const kill: TortureEvent = { type: 'crash', t: 1_000, worker: 'w0', detail: 'exit SIGKILL' };
    const stopping: TortureEvent = { type: 'stopping', t: 30_000, worker: 'w1' };
    const request: TortureEvent = { type: 'request', t: 10, worker: 'w1', key: NAME };
    const base = [term(0, 'w0', 1), request, kill, stopping];
    expect(checkFailovers([...base, term(4_000, 'w1', 2)], bound)).toEqual([]);
    expect(checkFailovers([...base, term(12_000, 'w1', 2)], bound).map((v) => v.rule)).toEqual(['failover']);
    expect(checkFailovers(base, bound)).toHaveLength(1);
    // A worker that had released its term was no leader; a run that stopped too soon is not judged.
    const released: TortureEvent = { type: 'release', t: 500, worker: 'w0', grant: 'w0#1' };
    expect(checkFailovers([...base, released], bound)).toEqual([]);
    expect(checkFailovers([term(0, 'w0', 1), kill, { ...stopping, t: 5_000 }], bound)).toEqual([]);
    // A candidate cut off for 4 s lengthens the window by 4 s + recovery; the same fault on an
    // observer, or a fault that only hits holders, does not.
    const cut = (target: string, kind = 'partitionWorker'): TortureEvent => ({
      type: 'fault',
      t: 2_000,
      tEnd: 6_000,
      kind,
      target: `${target} for 4000 ms`,
      pausedWorkers: [],
      workers: [target],
    });
    expect(checkFailovers([...base, cut('w1'), term(18_000, 'w1', 2)], bound)).toEqual([]);
    expect(checkFailovers([...base, cut('w1'), term(19_500, 'w1', 2)], bound)).toHaveLength(1);
    expect(checkFailovers([...base, cut('w2'), term(12_000, 'w1', 2)], bound)).toHaveLength(1);
    expect(checkFailovers([...base, cut('w1', 'pauseHolder'), term(12_000, 'w1', 2)], bound)).toHaveLength(1);
    // Kills judged: one whose window closes before the run's end; none when it would close after.
    const tally = { judged: 0 };
    checkFailovers([...base, cut('w1'), term(18_000, 'w1', 2)], { ...bound, tally });
    expect(tally.judged).toBe(1);
    checkFailovers([term(0, 'w0', 1), kill, { ...stopping, t: 5_000 }], { ...bound, tally });
    expect(tally.judged).toBe(1);
  });
});

const SEED = 20261201;

/** Runs the runner with `args` and returns its reports (exit 1 = violations, reported on stdout). */
const tortureAll = (args: string[]) =>
  tortureReports(['--seed', String(SEED), ...args], { timeoutMs: 90_000 });
const counts = (report: TortureReport | undefined) => {
  const out: Record<string, number> = {};
  for (const v of report?.violations ?? []) out[v.rule] = (out[v.rule] ?? 0) + 1;
  return out;
};

describe('election torture runs', () => {
  it('the controls go red: two leaders (overlap), a replayed report (stale-observe), nobody in line (failover)', async () => {
    const memory = ['--backend', 'memory', '--workload', 'election'];
    const [twoLeaders, staleObserve, noFailover] = await Promise.all([
      tortureAll([...memory, '--seconds', '4', '--unsafe', 'two-leaders', '--no-nemesis']),
      tortureAll([...memory, '--seconds', '8', '--unsafe', 'stale-observe', '--no-nemesis']),
      tortureAll([...memory, '--seconds', '4', '--unsafe', 'no-failover', '--faults', 'killWorker']),
    ]);
    expect(counts(twoLeaders[0]).overlap).toBeGreaterThan(0);
    expect(counts(staleObserve[0])['stale-observe']).toBeGreaterThan(0);
    expect(counts(noFailover[0]).failover).toBeGreaterThan(0);
  }, 90_000);
});
