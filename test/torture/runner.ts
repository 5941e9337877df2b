import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import type { TortureReport } from '../../torture/run.js';

// The torture tests drive the built runner (.tmp/torture/main.js) exactly as `npm run torture` runs it.
const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');

/** Builds the runner (the package itself is built by npm test before vitest). */
export async function buildTorture(): Promise<void> {
  await run('npm', ['run', 'torture:build', '--silent'], { cwd: root, timeout: 60_000 });
}

export interface TortureRunOptions {
  /** Ends the run (and fails the test) after this long. */
  timeoutMs: number;
  /** Another checkout's build to drive, loaded through the runner's resolve hook. */
  lib?: string;
}

/** Runs the runner with `args` (plus --json) and returns its reports, one per backend and workload. */
export async function tortureReports(args: string[], options: TortureRunOptions): Promise<TortureReport[]> {
  // Another build is loaded through the resolve hook given here (not by main.js running itself
  // again), so the timeout below ends the run itself.
  const hook = options.lib ? ['--import', './.tmp/torture/library.js'] : [];
  const { stdout } = await run('node', [...hook, '.tmp/torture/main.js', '--json', ...args], {
    cwd: root,
    timeout: options.timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
    env: options.lib ? { ...process.env, FENCEKIT_TORTURE_LIB: options.lib } : process.env,
  }).catch((error: { stdout?: string; code?: number }) => {
    // Exit code 1 means violations: the report on stdout says which; anything else is a failure.
    if (error.code === 1 && error.stdout) return { stdout: error.stdout };
    throw error;
  });
  const reports = JSON.parse(stdout) as TortureReport[];
  if (reports.length === 0) throw new Error(`no report in ${stdout}`);
  return reports;
}

/** The first report of a run (a run of one workload on one backend). */
export async function tortureReport(args: string[], options: TortureRunOptions): Promise<TortureReport> {
  const [report] = await tortureReports(args, options);
  if (!report) throw new Error('no report');
  return report;
}
