import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { TortureBackend } from './cluster.js';
import { LIBRARY_ACTIVE, LIBRARY_ENV } from './library-env.js';
import { runTorture, type TortureReport } from './run.js';
import { formatTable } from './table.js';
import { WORKLOADS, workload } from './workloads/index.js';
import type { WorkloadName } from './workloads/workload.js';

const USAGE = `npm run torture -- --backend <name|all> [--workload <name,…|all>] [--seconds N] [--workers N]
  [--seed S] [--faults a,b] [--no-fencing] [--no-nemesis] [--unsafe VARIANT] [--json] [--lib DIR]
  [--min-grants N]  (the quiet tail lasts until every workload made N grants, at most 60 s more)
  [--min-faults N]  (the faulted part lasts until N faults were injected, at most 60 s more)
  [--until-violation RULE]  (a control run: the faulted part lasts until RULE is broken, at most 60 s more)
backends: memory, redis, postgres, etcd, zookeeper, redlock, all
workloads: ${Object.keys(WORKLOADS).join(', ')}, all
docs/torture.md describes the workloads, their rules, the faults and the controls.`;
const ALL: TortureBackend[] = ['memory', 'redis', 'postgres', 'etcd', 'zookeeper', 'redlock'];
const values = parseOptions();

function parseOptions() {
  try {
    const parsed = parseArgs({
      options: {
        help: { type: 'boolean', short: 'h', default: false },
        backend: { type: 'string', default: 'memory' },
        workload: { type: 'string', default: 'all' },
        seconds: { type: 'string', default: '30' },
        workers: { type: 'string', default: '3' },
        seed: { type: 'string' },
        'no-fencing': { type: 'boolean', default: false },
        'no-nemesis': { type: 'boolean', default: false },
        unsafe: { type: 'string' },
        faults: { type: 'string' },
        json: { type: 'boolean', default: false },
        'min-grants': { type: 'string' },
        'min-faults': { type: 'string' },
        'until-violation': { type: 'string' },
        /** Drive another checkout's build (e.g. a worktree of an old commit) instead of this one's. */
        lib: { type: 'string' },
      },
    }).values;
    if (parsed.help) {
      console.log(USAGE);
      process.exit(0);
    }
    return parsed;
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
}
const lib = values.lib ?? process.env[LIBRARY_ENV];
if (lib && (globalThis as Record<symbol, unknown>)[LIBRARY_ACTIVE] !== resolve(lib)) {
  // The resolve hook must be in place before the package is first imported: run again with it.
  const hook = resolve(import.meta.dirname, 'library.js');
  const again = spawnSync(process.execPath, ['--import', hook, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, [LIBRARY_ENV]: resolve(lib) },
  });
  process.exit(again.status ?? 1);
}
const backends = values.backend === 'all' ? ALL : [values.backend as TortureBackend];
for (const b of backends)
  if (!ALL.includes(b)) throw new Error(`unknown backend ${b}; one of ${ALL.join(', ')}, all`);
const workloads = (
  values.workload === 'all' ? Object.keys(WORKLOADS) : values.workload.split(',')
) as WorkloadName[];
for (const w of workloads) workload(w); // an unknown name fails here, before servers start
if (values.unsafe && !workloads.some((w) => workload(w).unsafe.includes(values.unsafe ?? ''))) {
  const known = workloads.flatMap((w) => workload(w).unsafe.map((u) => `${u} (${w})`));
  throw new Error(`unknown --unsafe ${values.unsafe} for these workloads; one of ${known.join(', ')}`);
}
const seed = values.seed ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
const reports: TortureReport[] = [];
for (const backend of backends) {
  const runReports = await runTorture({
    backend,
    workloads,
    seconds: Number(values.seconds),
    workers: Number(values.workers),
    ...(values['min-grants'] ? { minGrants: Number(values['min-grants']) } : {}),
    ...(values['min-faults'] ? { minFaults: Number(values['min-faults']) } : {}),
    ...(values['until-violation'] ? { untilViolation: values['until-violation'] } : {}),
    seed,
    workerScript: resolve(import.meta.dirname, 'worker-main.js'),
    fencing: !values['no-fencing'],
    nemesis: !values['no-nemesis'],
    ...(values.unsafe ? { unsafe: values.unsafe } : {}),
    ...(values.faults ? { faults: values.faults.split(',') } : {}),
    historyDir: resolve(import.meta.dirname, 'histories'),
    log: values.json ? (line) => console.error(line) : (line) => console.log(line),
  });
  reports.push(...runReports);
  for (const report of runReports) {
    for (const v of report.violations.slice(0, 20)) {
      console.error(`VIOLATION ${backend} ${report.workload} seed=${seed} ${v.rule}: ${v.message}`);
      for (const e of v.events) console.error(`    ${JSON.stringify(e)}`);
    }
  }
}
const output = values.json
  ? JSON.stringify(reports)
  : `${formatTable(reports)}\nreplay: npm run torture -- ${replayArgs()}`;
// Exit explicitly once the output is flushed: after redis runs the runner was seen idling on with
// an open TCP socket and timers (not yet traced to their owner); a finished run must not hang CI.
process.stdout.write(`${output}\n`, () => process.exit(reports.some((r) => r.violations.length > 0) ? 1 : 0));

/** The command line of this run with its seed fixed: the same faults, workload and library. */
function replayArgs(): string {
  const args = process.argv.slice(2);
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--seed') i++;
    else if (!arg.startsWith('--seed=')) kept.push(arg);
  }
  return [...kept, '--seed', String(seed)].join(' ');
}
