import { expect, it } from 'vitest';
import type { TortureBackend } from '../../torture/cluster.js';
import type { TortureReport } from '../../torture/run.js';
import { tortureReports } from './runner.js';

// Every workload the backend has, side by side under one nemesis: one short run per backend
// (each workload's own test file holds its rules' unit tests and its control runs). The list of
// workloads is written out: a workload that silently stopped running for a backend is a failure.
// The backends are split over two test files (every-workload-*.test.ts) so that no one file is a
// long tail of the whole test run.
const SEED = 20261201;
export const ALL_WORKLOADS = ['lock', 'semaphore', 'read-write', 'election', 'facades', 'idempotency', 'cli'];
export const without = (...skipped: string[]) => ALL_WORKLOADS.filter((w) => !skipped.includes(w));

const violations = (report: TortureReport) =>
  report.violations.map((v) => `${v.rule}: ${v.message}`).slice(0, 10);

export function itRunsEveryWorkload(cases: [TortureBackend, number, string[]][]): void {
  it.each(cases)(
    '%s: every workload, no violation under faults, with faults and grants',
    async (backend, seconds, expected) => {
      const reports = await tortureReports(
        [
          '--seed',
          String(SEED),
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
        ],
        { timeoutMs: 150_000 },
      );
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
}
