import { describe, expect, it } from 'vitest';
import type { TortureBackend } from '../../torture/cluster.js';
import type { TortureReport } from '../../torture/run.js';
import { tortureReports } from './runner.js';

// Short, fixed-seed torture runs through the built runner (npm test builds the package first),
// exactly as `npm run torture` runs it. Each asserts three things: the checker found nothing,
// faults were really injected, and grants really happened — a run that did nothing fails.
const SEED = 20261201;

/** A built checkout of an old commit to run against (see docs/torture.md); unset: skipped. */
const OLD_LIB = process.env.FENCEKIT_TORTURE_OLD_LIB;

/** Runs the runner with `args` and returns its reports, one per backend and workload. */
const tortureAll = (args: string[], lib?: string) =>
  tortureReports(['--seed', String(SEED), ...args], { timeoutMs: 150_000, ...(lib ? { lib } : {}) });

/** The lock workload's report of a run of it alone. */
async function torture(args: string[], lib?: string): Promise<TortureReport> {
  const [report] = await tortureAll(['--workload', 'lock', ...args], lib);
  if (!report) throw new Error('no report');
  return report;
}

const violations = (report: TortureReport) =>
  report.violations.map((v) => `${v.rule}: ${v.message}`).slice(0, 10);

describe('torture suite', () => {
  describe('the pipeline can go red', () => {
    it('a provider without exclusion, writing unfenced: overlaps and stale writes accepted', async () => {
      const report = await torture([
        '--backend',
        'memory',
        '--seconds',
        '5',
        '--unsafe',
        'no-exclusion',
        '--no-fencing',
      ]);
      const rules = new Set(report.violations.map((v) => v.rule));
      expect(rules.has('overlap')).toBe(true);
      expect(rules.has('stale-write')).toBe(true);
    }, 120_000);

    it("control run on Redis with fencing off: a frozen holder's late write is accepted (stale-write)", async () => {
      const args = [
        '--backend',
        'redis',
        '--seconds',
        '20',
        '--workers',
        '4',
        '--faults',
        'pauseHolder',
        '--seed',
        '19',
      ];
      const report = await torture([...args, '--no-fencing']);
      expect(report.violations.some((v) => v.rule === 'stale-write')).toBe(true);
    }, 150_000);

    it('a provider that hands out grants already aborted: born-lost', async () => {
      const report = await torture(['--backend', 'memory', '--seconds', '3', '--unsafe', 'born-lost']);
      expect(report.violations.some((v) => v.rule === 'born-lost')).toBe(true);
    }, 120_000);
  });

  describe.skipIf(!OLD_LIB)('against the old build in FENCEKIT_TORTURE_OLD_LIB (f35576d)', () => {
    it('the stall fault finds grants and terms handed out already lost', async () => {
      const args = ['--backend', 'redis', '--seconds', '40', '--faults', 'stallAfterAcquire', '--seed', '3'];
      const report = await torture(args, OLD_LIB);
      const messages = report.violations.filter((v) => v.rule === 'born-lost').map((v) => v.message);
      expect(messages.some((m) => m.includes('signal already aborted'))).toBe(true);
      expect(messages.some((m) => m.includes("its lock's signal was already aborted"))).toBe(true);
    }, 150_000);
  });

  it('redis: a worker stalled right after acquire() is never handed a lost grant', async () => {
    const args = ['--backend', 'redis', '--seconds', '15', '--faults', 'stallAfterAcquire'];
    const report = await torture(args);
    expect(violations(report)).toEqual([]);
    expect(report.faults.stallAfterAcquire ?? 0).toBeGreaterThan(0);
    expect(report.grants).toBeGreaterThan(10);
  }, 150_000);

  // Every workload the backend has, side by side under one nemesis: one short run per backend
  // (each workload's own test file holds its rules' unit tests and its control runs). The list of
  // workloads is written out: a workload that silently stopped running for a backend is a failure.
  const ALL = ['lock', 'semaphore', 'read-write', 'election', 'facades', 'idempotency', 'cli'];
  const without = (...skipped: string[]) => ALL.filter((w) => !skipped.includes(w));
  const cases: [TortureBackend, number, string[]][] = [
    ['memory', 6, without('cli')],
    ['redis', 10, ALL],
    ['postgres', 10, ALL],
    ['etcd', 12, ALL],
    ['zookeeper', 12, without('idempotency')],
    ['redlock', 10, without('idempotency', 'semaphore', 'read-write')],
  ];
  it.each(cases)(
    '%s: every workload, no violation under faults, with faults and grants',
    async (backend, seconds, expected) => {
      const reports = await tortureAll([
        '--backend',
        backend,
        '--seconds',
        String(seconds),
        '--workload',
        'all',
        // Every workload must show its pipeline works: the run waits for grants, not for a time.
        '--min-grants',
        '3',
        // … and for faults: the first comes after the first grant, late on a busy machine.
        '--min-faults',
        '1',
      ]);
      expect(reports.map((r) => r.workload)).toEqual(expected);
      for (const report of reports) {
        expect({ workload: report.workload, violations: violations(report) }).toEqual({
          workload: report.workload,
          violations: [],
        });
        expect({ workload: report.workload, grants: report.grants >= 3 }).toEqual({
          workload: report.workload,
          grants: true,
        });
      }
      expect(reports.find((r) => r.workload === 'lock')?.writesAccepted).toBeGreaterThan(10);
      // Each report counts the faults that could touch its workload; together, every fault.
      const injected = reports.flatMap((r) => Object.values(r.faults)).reduce((a, b) => a + b, 0);
      expect(injected).toBeGreaterThan(0);
    },
    150_000,
  );
});
