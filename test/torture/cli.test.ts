import { describe, expect, it } from 'vitest';
import type { TortureEvent } from '../../torture/history.js';
import type { TortureReport } from '../../torture/run.js';
import { cliWorkload } from '../../torture/workloads/cli.js';
import { checkCliGroups } from '../../torture/workloads/cli-rules.js';
import { tortureReport } from './runner.js';

// The cli workload: its two rules on hand-made histories (red on a bad one, green on the good
// one), then the control run that breaks both and a short run that must stay green.

/** A group of worker w: its grant (the leader's start) with token n on key k. */
const grant = (t: number, w: string, n: number): TortureEvent => ({
  type: 'grant',
  t,
  worker: w,
  key: 'k',
  grant: `${w}#${n}`,
  kind: 'lock',
  token: String(n),
  abortedAtGrant: false,
});
const write = (t: number, w: string, n: number, result: 'accepted' | 'rejected'): TortureEvent => ({
  type: 'write',
  t,
  tEnd: t + 1,
  worker: w,
  key: 'k',
  grant: `${w}#${n}`,
  token: String(n),
  live: true,
  result,
});
const alive = (t: number, w: string, n: number): TortureEvent => ({
  type: 'alive',
  t,
  worker: w,
  grant: `${w}#${n}`,
  member: 'member',
});
const cliExit = (
  t: number,
  w: string,
  n: number,
  code: number | null,
  signal: string | null = null,
): TortureEvent => ({
  type: 'cli-exit',
  t,
  worker: w,
  grant: `${w}#${n}`,
  code,
  signal,
});
const freeze = (t: number, tEnd: number, w: string): TortureEvent => ({
  type: 'fault',
  t,
  tEnd,
  kind: 'pauseHolder',
  target: w,
  pausedWorkers: [w],
});
const rules = (events: TortureEvent[]) => checkCliGroups(events).map((v) => v.rule);

/** A: group 1 of w0 runs 0..100, its CLI exits at 110; B: w1's group 2 granted at 120. */
const clean = [
  grant(0, 'w0', 1),
  write(10, 'w0', 1, 'accepted'),
  alive(90, 'w0', 1),
  cliExit(110, 'w0', 1, 0),
  grant(120, 'w1', 2),
  write(130, 'w1', 2, 'accepted'),
];

describe('cli workload rules', () => {
  it('a group that ends before its CLI exits and the next grant: no violation', () => {
    expect(rules(clean)).toEqual([]);
  });

  it('group-write-after-grant: an accepted write of a group after the next grant; a rejected one is fine', () => {
    expect(rules([...clean, write(700, 'w0', 1, 'rejected')])).not.toContain('group-write-after-grant');
    const late = rules([...clean, write(700, 'w0', 1, 'accepted')]);
    expect(late).toContain('group-write-after-grant');
    expect(late).toContain('released-while-alive'); // it also ran after the release
  });

  it('released-while-alive: a heartbeat after the CLI released, or after the next grant', () => {
    expect(rules([...clean, alive(115, 'w0', 1)])).toEqual(['released-while-alive']); // after the exit
    const lost = [grant(0, 'w0', 1), grant(100, 'w1', 2), alive(700, 'w0', 1), cliExit(800, 'w0', 1, 137)];
    expect(rules(lost)).toEqual(['released-while-alive']); // after the next grant, CLI still running
    // The last steps of a group the CLI killed as soon as it learnt of the loss: not judged.
    const killedLate = [
      grant(0, 'w0', 1),
      grant(100, 'w1', 2),
      alive(250, 'w0', 1),
      cliExit(500, 'w0', 1, 137),
    ];
    expect(rules(killedLate)).toEqual([]);
    const pastSlack = [
      grant(0, 'w0', 1),
      grant(100, 'w1', 2),
      alive(350, 'w0', 1),
      cliExit(500, 'w0', 1, 137),
    ];
    expect(rules(pastSlack)).toEqual(['released-while-alive']);
  });

  it('a CLI that left without releasing (71) or was killed does not count as a release', () => {
    expect(rules([grant(0, 'w0', 1), cliExit(50, 'w0', 1, 71), alive(60, 'w0', 1)])).toEqual([]);
  });

  it('a group whose CLI was frozen since its grant or SIGKILLed runs unattended: fencing covers it', () => {
    const frozen = [...clean, freeze(50, 3000, 'w0'), write(700, 'w0', 1, 'accepted')];
    expect(rules(frozen)).toEqual([]);
    const orphan = [
      grant(0, 'w0', 1),
      cliExit(50, 'w0', 1, null, 'SIGKILL'),
      grant(120, 'w1', 2),
      write(700, 'w0', 1, 'accepted'),
    ];
    expect(rules(orphan)).toEqual([]);
    // A freeze of another worker's CLI exempts nothing.
    expect(rules([...clean, freeze(50, 3000, 'w1'), write(700, 'w0', 1, 'accepted')])).toContain(
      'group-write-after-grant',
    );
  });

  it("the workload's check keeps tokens, stale-write and progress, without overlap", () => {
    const result = cliWorkload.check(clean, { progressBoundMs: 1_000 });
    expect(result.violations).toEqual([]);
    expect(result.grants).toBe(2);
    const stale = cliWorkload.check([...clean, write(700, 'w0', 1, 'accepted')], { progressBoundMs: 1_000 });
    expect(stale.violations.map((v) => v.rule)).toEqual(
      expect.arrayContaining(['stale-write', 'group-write-after-grant']),
    );
  });
});

/** Runs the built runner with `args` (--json) and returns the cli workload's report. */
const tortureCli = (args: string[]) =>
  tortureReport(['--workload', 'cli', '--backend', 'redis', ...args], { timeoutMs: 90_000 });
const count = (report: TortureReport, rule: string) =>
  report.violations.filter((v) => v.rule === rule).length;

describe('cli workload runs', () => {
  it('control: a member that leaves the session (setsid) outlives the release: both rules go red', async () => {
    // Fencing off: the escaped member's writes after the next grant are accepted, not refused.
    const report = await tortureCli([
      '--seconds',
      '5',
      '--seed',
      '7',
      '--no-nemesis',
      '--no-fencing',
      '--unsafe',
      'early-release',
    ]);
    expect(report.grants).toBeGreaterThan(1);
    expect(count(report, 'released-while-alive')).toBeGreaterThan(0);
    expect(count(report, 'group-write-after-grant')).toBeGreaterThan(0);
  }, 100_000);
});
