import type { Rule } from './checker.js';
import type { TortureReport } from './run.js';

/** The summary table: one row per backend and workload. */
export function formatTable(reports: readonly TortureReport[]): string {
  const head = [
    'backend',
    'workload',
    'seed',
    'grants',
    'writes ok',
    'rejected',
    'stale rejected',
    'stale accepted',
    'overlaps',
    'leftovers',
    'faults',
    'max progress ms',
    'judged',
    'violations',
  ];
  const rows = reports.map((r) => [
    r.backend,
    r.workload,
    String(r.seed),
    String(r.grants),
    String(r.writesAccepted),
    String(r.writesRejected),
    String(r.staleRejected),
    count(r, 'stale-write'),
    count(r, 'overlap'),
    count(r, 'leftover'),
    Object.entries(r.faults)
      .map(([kind, n]) => `${kind}:${n}`)
      .join(' ') || '-',
    String(Math.round(r.maxProgressMs)),
    Object.entries(r.judged ?? {})
      .map(([rule, n]) => `${rule}:${n}`)
      .join(' ') || '-',
    summarize(r),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** One rule's violations in the report, counted for its own column: a row reads as the checker's verdict. */
function count(report: TortureReport, rule: Rule): string {
  return String(report.violations.filter((v) => v.rule === rule).length);
}

function summarize(report: TortureReport): string {
  if (report.violations.length === 0) return '0';
  const counts: Record<string, number> = {};
  for (const v of report.violations) counts[v.rule] = (counts[v.rule] ?? 0) + 1;
  return Object.entries(counts)
    .map(([rule, n]) => `${rule}:${n}`)
    .join(' ');
}
