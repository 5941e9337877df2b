import { describe, expect, it } from 'vitest';
import { checkHistory, type Rule } from '../../torture/checker.js';
import type { TortureEvent } from '../../torture/history.js';
import { shareOf } from '../../torture/share.js';
import type { WorkloadName } from '../../torture/workloads/workload.js';

// Hand-made histories: each rule is shown red on a bad one and green on the good one.
const opts = { progressBoundMs: 1_000 };

function grant(t: number, worker: string, token: number, extra: Partial<TortureEvent> = {}): TortureEvent {
  return {
    type: 'grant',
    t,
    worker,
    key: 'k',
    grant: `${worker}#${token}`,
    kind: 'lock',
    token: String(token),
    abortedAtGrant: false,
    ...extra,
  } as TortureEvent;
}
function write(t: number, worker: string, token: number, live: boolean, result: 'accepted' | 'rejected') {
  return {
    type: 'write',
    t,
    tEnd: t + 1,
    worker,
    key: 'k',
    grant: `${worker}#${token}`,
    token: String(token),
    live,
    result,
  } as TortureEvent;
}
const release = (t: number, worker: string, token: number): TortureEvent => ({
  type: 'release',
  t,
  worker,
  grant: `${worker}#${token}`,
});

/** Two holders one after the other, each writing once: the history every rule accepts. */
const good: TortureEvent[] = [
  grant(0, 'a', 1),
  write(10, 'a', 1, true, 'accepted'),
  release(20, 'a', 1),
  grant(30, 'b', 2),
  write(40, 'b', 2, true, 'accepted'),
  release(50, 'b', 2),
];

const rulesOf = (events: TortureEvent[]): Rule[] => checkHistory(events, opts).violations.map((v) => v.rule);

describe('torture checker', () => {
  it('accepts a correct history', () => {
    const result = checkHistory(good, opts);
    expect(result.violations).toEqual([]);
    expect(result.grants).toBe(2);
    expect(result.writesAccepted).toBe(2);
  });

  it('rule tokens: a token granted twice, or one lower than the previous grant', () => {
    expect(rulesOf([grant(0, 'a', 1), release(5, 'a', 1), grant(30, 'b', 1, { grant: 'b#x' })])).toContain(
      'tokens',
    );
    expect(rulesOf([grant(0, 'a', 5), release(5, 'a', 5), grant(30, 'b', 4)])).toEqual(['tokens']);
  });

  it('rule born-lost: a grant handed out with its signal already aborted', () => {
    expect(rulesOf([grant(0, 'a', 1, { abortedAtGrant: true }), grant(30, 'b', 2)])).toEqual(['born-lost']);
  });

  it('rule born-lost: a term handed out live though its own lock had already lost its signal', () => {
    const term = (lockAborted: boolean) =>
      grant(0, 'a', 1, { kind: 'term', lockAborted } as Partial<TortureEvent>);
    expect(rulesOf([term(true), grant(30, 'b', 2)])).toEqual(['born-lost']);
    expect(rulesOf([term(false), grant(30, 'b', 2)])).toEqual([]);
  });

  it('rule born-lost: a grant handed out live though its reply came later than the lease', () => {
    const delay: TortureEvent = {
      type: 'fault',
      t: 0,
      tEnd: 3_000,
      kind: 'delayWorker',
      target: 'a',
      pausedWorkers: [],
      late: { worker: 'a', ms: 1_500 },
    };
    const withTtl = { progressBoundMs: 10_000, ttlMs: 1_000 };
    const bornLost = (events: TortureEvent[]) =>
      checkHistory(events, withTtl).violations.filter((v) => v.rule === 'born-lost');
    // Reply sent at 500 (inside the fault), arrived at 2000: the 1000 ms lease ran out at 1500.
    // Nothing held back arrives after the heal (a reset), so a grant after 3000 is on time.
    const late = [delay, grant(2_000, 'a', 1)];
    expect(bornLost(late)).toHaveLength(1);
    expect(bornLost([delay, grant(4_600, 'a', 1)])).toEqual([]);
    // A delay shorter than the lease leaves time to use the grant.
    const short = { ...delay, late: { worker: 'a', ms: 800 } } as TortureEvent;
    expect(bornLost([short, grant(1_300, 'a', 1)])).toEqual([]);
    // Another worker's grant is not concerned.
    expect(bornLost([delay, grant(2_000, 'b', 1)])).toEqual([]);
  });

  it('rule overlap: b live while a still saw itself live later', () => {
    const bad = [
      grant(0, 'a', 1),
      grant(10, 'b', 2),
      write(15, 'b', 2, true, 'accepted'),
      write(20, 'a', 1, true, 'rejected'),
    ];
    expect(rulesOf(bad)).toContain('overlap');
  });

  it('rule overlap: a holder frozen (SIGSTOP) after its grant is not trusted, fencing covers it', () => {
    const frozen: TortureEvent = {
      type: 'fault',
      t: 5,
      tEnd: 18,
      kind: 'pause-holder',
      target: 'a',
      pausedWorkers: ['a'],
    };
    const history = [
      grant(0, 'a', 1),
      frozen,
      grant(10, 'b', 2),
      write(15, 'b', 2, true, 'accepted'),
      write(20, 'a', 1, true, 'rejected'),
      grant(25, 'c', 3),
    ];
    expect(rulesOf(history)).toEqual([]);
  });

  it('rule stale-write: a lower token accepted after a higher one was', () => {
    const bad = [
      grant(0, 'a', 1),
      grant(10, 'b', 2),
      write(15, 'b', 2, true, 'accepted'),
      write(20, 'a', 1, false, 'accepted'),
    ];
    expect(rulesOf(bad)).toEqual(['stale-write']);
    const fenced = [...bad.slice(0, 3), write(20, 'a', 1, false, 'rejected')];
    expect(rulesOf(fenced)).toEqual([]);
    expect(checkHistory(fenced, opts).staleRejected).toBe(1);
  });

  it('rule progress: no grant after a heal within the bound, or none at all', () => {
    const fault: TortureEvent = {
      type: 'fault',
      t: 60,
      tEnd: 100,
      kind: 'kill',
      target: 'w',
      pausedWorkers: [],
    };
    expect(rulesOf([...good, fault])).toEqual(['progress']);
    expect(rulesOf([...good, fault, grant(900, 'c', 3)])).toEqual([]);
    expect(rulesOf([...good, fault, grant(1_200, 'c', 3)])).toEqual(['progress']);
    expect(rulesOf([])).toEqual(['progress']);
  });

  it('rule crash: a worker that ends unasked, unless the nemesis killed it', () => {
    const crash = (detail: string): TortureEvent => ({ type: 'crash', t: 60, worker: 'a', detail });
    expect(rulesOf([...good, crash('exit 1')])).toEqual(['crash']);
    expect(rulesOf([...good, crash('did not stop within 15 s')])).toEqual(['crash']);
    expect(rulesOf([...good, crash('exit SIGKILL')])).toEqual([]);
    expect(rulesOf([...good, crash('simulated crash')])).toEqual([]);
  });

  it('rule leftover: something still held after every worker closed', () => {
    expect(rulesOf([...good, { type: 'leftover', t: 99, workload: 'lock', detail: 'k: held by a' }])).toEqual(
      ['leftover'],
    );
  });
});

describe("a workload's share of the history", () => {
  const workloadOf = new Map<string, WorkloadName>([
    ['w0', 'lock'],
    ['w1', 'semaphore'],
  ]);
  const fault = (workers?: string[]): TortureEvent => ({
    type: 'fault',
    t: 0,
    tEnd: 10,
    kind: workers ? 'partitionWorker' : 'memberKill',
    target: 'x',
    pausedWorkers: [],
    ...(workers ? { workers } : {}),
  });

  it('holds the faults on the servers and those aimed at its own workers, not at another workload’s', () => {
    const history = [fault(), fault(['w0']), fault(['w1']), grant(5, 'w0', 1), grant(6, 'w1', 2)];
    expect(shareOf(history, 'lock', workloadOf)).toEqual([history[0], history[1], history[3]]);
    expect(shareOf(history, 'semaphore', workloadOf)).toEqual([history[0], history[2], history[4]]);
  });
});
