import { describe, expect, it } from 'vitest';
import type { Rule } from '../../torture/checker.js';
import type { TortureEvent } from '../../torture/history.js';
import { idempotencyWorkload } from '../../torture/workloads/idempotency.js';
import { tortureReports } from './runner.js';

// The idempotency workload: its rules on hand-made histories, then one control run that must go
// red and one short run on PostgreSQL that must not.

/** Runs the built runner with `args` and returns its reports. */
const tortureAll = (args: string[]) => tortureReports(args, { timeoutMs: 60_000 });

const opts = { progressBoundMs: 10_000 };
const rulesOf = (events: TortureEvent[]): Rule[] =>
  idempotencyWorkload.check(events, opts).violations.map((v) => v.rule);

const grant = (t: number, worker: string, token: number): TortureEvent => ({
  type: 'grant',
  t,
  worker,
  key: 'k',
  grant: `${worker}#${token}`,
  kind: 'run',
  token: String(token),
  abortedAtGrant: false,
});
const write = (t: number, worker: string, token: number, result: 'accepted' | 'rejected'): TortureEvent => ({
  type: 'write',
  t,
  tEnd: t + 1,
  worker,
  key: 'k',
  grant: `${worker}#${token}`,
  token: String(token),
  live: true,
  result,
});
const got = (t: number, worker: string, result: string, extra: Partial<TortureEvent> = {}): TortureEvent =>
  ({ type: 'outcome', t, worker, key: 'k', result, replayed: true, ...extra }) as TortureEvent;
const final = (value: string, token: number, stored: string | null): TortureEvent => ({
  type: 'final',
  t: 1_000,
  workload: 'idempotency',
  key: 'k',
  effect: { value, token: String(token) },
  stored: stored === null ? null : { result: stored, final: false },
});

/**
 * a#1 froze after its effect; b#2 took the record over, wrote the effect again with a higher
 * token and stored its result; a#1's late completion was refused (a typed error); c replayed b's.
 */
const good: TortureEvent[] = [
  grant(0, 'a', 1),
  write(10, 'a', 1, 'accepted'),
  grant(3_000, 'b', 2),
  write(3_010, 'b', 2, 'accepted'),
  got(3_050, 'b', 'b#2', { run: 'b#2', replayed: false }),
  got(4_000, 'a', '', {
    run: 'a#1',
    result: undefined,
    error: 'STALE_FENCING_TOKEN',
  } as Partial<TortureEvent>),
  got(4_100, 'c', 'b#2'),
  final('b#2', 2, 'b#2'),
];

describe('torture idempotency rules', () => {
  it('accept a takeover whose earlier run had written its effect first', () => {
    expect(rulesOf(good)).toEqual([]);
  });

  it('one-result: two callers with different results, a fresh result not the caller’s own, a lost record', () => {
    expect(rulesOf([...good.slice(0, -1), got(4_200, 'd', 'a#1'), final('b#2', 2, 'b#2')])).toContain(
      'one-result',
    );
    const stolen = good.map((e) => (e.type === 'outcome' && e.worker === 'b' ? { ...e, run: 'x#9' } : e));
    expect(rulesOf(stolen)).toContain('one-result');
    expect(rulesOf([...good.slice(0, -1), final('b#2', 2, null)])).toContain('one-result');
  });

  it('late-completion: the completion of a run that was taken over is stored', () => {
    // a#1's late completion reached its caller as fresh, and the record replays it.
    const late = [
      ...good.slice(0, 5),
      got(4_000, 'a', 'a#1', { run: 'a#1', replayed: false }),
      final('b#2', 2, 'a#1'),
    ];
    expect(rulesOf(late)).toContain('late-completion');
  });

  it('effect: the effect stands as written by a run other than the stored one', () => {
    expect(rulesOf([...good.slice(0, -1), final('a#1', 1, 'b#2')])).toEqual(['effect']);
  });

  it('typed-error: a caller got an error that is neither a FencekitError nor fn’s own', () => {
    const untyped = got(4_300, 'd', '', {
      result: undefined,
      error: 'TypeError: x',
      untyped: true,
    } as Partial<TortureEvent>);
    expect(rulesOf([...good, untyped])).toEqual(['typed-error']);
  });
});

describe('torture idempotency runs', () => {
  it('control: completions without a fence store a run that was taken over (memory)', async () => {
    const [report] = await tortureAll([
      ...['--backend', 'memory', '--workload', 'idempotency', '--seconds', '10', '--seed', '1'],
      ...['--unsafe', 'unfenced-completion'],
    ]);
    const rules = new Set(report?.violations.map((v) => v.rule));
    expect(rules.has('late-completion')).toBe(true);
    expect(rules.has('one-result')).toBe(true);
  }, 60_000);
});
