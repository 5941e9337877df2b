import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CheckOptions, checkHistory } from '../checker.js';
import { now, type TortureEvent } from '../history.js';
import { between, pick } from '../random.js';
import { sleep } from '../sleep.js';
import { checkCliGroups } from './cli-rules.js';
import type { LeftoverContext, WorkerContext, Workload } from './workload.js';

const KEYS = ['c0', 'c1'];
/** Most runs take the first key: a lost lock meets a waiter that the server grants it to. */
const FIRST_KEY_SHARE = 0.85;
/**
 * What starting a CLI process may take before it asks for its grant (spawn, node, the package's
 * modules, a connection): 0.4 s on a quiet machine, 3–5 s measured in an etcd run of every
 * workload beside a busy core. The progress bound is this much longer for this workload.
 */
const CLI_START_MS = 5_000;

/** The lease the CLI asks for (--ttl; etcd: the session's TTL), the run's TTL_MS. */
const TTL_MS = 2_000;

/**
 * `fencekit lock` as a shell uses it: each worker runs `node dist/cli.js lock <key> … -- <group>` in
 * a loop, through its own proxies, where the group (cli-group.ts) writes to the protected storage
 * with the token from its environment and has a member that outlives SIGTERM. The nemesis's freeze
 * and kill reach the CLI process (holderIsChild): a frozen CLI's group runs on unattended, a killed
 * CLI's group is an orphan that only fencing stops (the worker kills it a little later, as an
 * operator would). Rules: cli-rules.ts.
 */
export const cliWorkload: Workload = {
  name: 'cli',
  backends: ['redis', 'postgres', 'etcd', 'zookeeper', 'redlock'],
  unsafe: ['early-release'],
  holderIsChild: true,
  storageKeys: KEYS,
  mode: () => 'cli',
  run: runCliWorker,
  leftovers: async ({ provider }: LeftoverContext) => {
    const found: string[] = [];
    for (const key of KEYS) {
      const info = await provider.inspect(key).catch((error: unknown) => ({ error: String(error) }));
      if (info && ('error' in info || info.holder || info.waiters > 0))
        found.push(`${key}: ${JSON.stringify(info, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    }
    return found;
  },
  check: (events, options: CheckOptions) => {
    const result = checkHistory(events, {
      ...options,
      // Each grant here starts a CLI process first: node, its modules and a connection.
      progressBoundMs: options.progressBoundMs + CLI_START_MS,
      skip: [...(options.skip ?? []), 'overlap'],
    });
    result.violations.push(...checkCliGroups(events));
    return result;
  },
};

/** A process of a group, named so that a later process that reuses the pid is never signalled. */
interface GroupProcess {
  pid: number;
  start: string;
}

async function runCliWorker(ctx: WorkerContext): Promise<void> {
  const { config, emit, stop, random } = ctx;
  const cli = resolve(dirname(fileURLToPath(import.meta.resolve('fencekit'))), 'cli.js');
  const group = resolve(import.meta.dirname, 'cli-group.js');
  const processes = new Map<string, GroupProcess[]>();
  /** Every CLI's stdout: a group process that escaped the kills (not yet reported) still holds one. */
  const pipes = new Set<NodeJS.ReadableStream & { destroy(): void }>();
  let current: ChildProcess | undefined;
  let frozen: ChildProcess | undefined;
  let grants = 0;

  /** Kills what is left of a grant's group: an orphan or an escaped member (normally all gone). */
  const killGroup = (grant: string) => {
    for (const p of processes.get(grant) ?? []) {
      if (sameProcess(p)) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {}
      }
    }
    processes.delete(grant);
  };
  const timers = new Set<NodeJS.Timeout>();
  /**
   * An orphan (its CLI killed) or an escaped member writes on beside the next holder for a while:
   * longer than the rules' kill slack (cli-rules.ts), so the control runs show it.
   */
  const killLater = (grant: string) => {
    const timer = setTimeout(
      () => {
        timers.delete(timer);
        killGroup(grant);
      },
      between(random, 1_000, 3_000),
    );
    timers.add(timer);
  };

  ctx.holder?.handle({
    freeze: (on) => {
      const target = on ? current : frozen;
      frozen = on ? current : undefined;
      target?.kill(on ? 'SIGSTOP' : 'SIGCONT');
    },
    crash: () => current?.kill('SIGKILL'),
  });

  const url = config.url.startsWith('etcd://') ? `${config.url}?sessionTtlMs=${TTL_MS}` : config.url;
  try {
    while (!stop.aborted) {
      const key = random() < FIRST_KEY_SHARE ? (KEYS[0] ?? '') : pick(random, KEYS);
      const grant = `${config.id}#${++grants}`;
      const grace = between(random, 200, 1_500);
      const onTerm = pick(random, ['ignore', 'handle', 'obey']);
      emit({ type: 'request', t: now(), worker: config.id, key });
      // The command's stdout is the CLI's: the pipe this worker reads the group's events from.
      const child = spawn(
        process.execPath,
        [
          ...[cli, 'lock', key, '--url', url, '--ttl', String(TTL_MS), '--wait', '5000'],
          ...['--grace', String(grace), '--owner', grant, '--'],
          ...[process.execPath, group, 'leader', config.id, grant, config.storageUrl],
          ...[config.fencing ? '1' : '0', config.unsafe === 'early-release' ? '1' : '0', onTerm],
          String(Math.floor(random() * 2 ** 31)),
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      current = child;
      if (child.stdout) pipes.add(child.stdout);
      let granted = false;
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-2_000);
        if (process.env.TORTURE_CLI_STDERR) process.stderr.write(`${now().toFixed(0)} ${grant}: ${chunk}`);
      });
      readLines(child, (text) => {
        const value = parseLine(text);
        if (!value) return;
        if ('ctl' in value) {
          const list = processes.get(value.grant) ?? [];
          list.push({ pid: value.pid, start: value.start });
          processes.set(value.grant, list);
          return;
        }
        if (value.type === 'grant') granted = true;
        emit(value);
      });
      const onStop = () => {
        child.kill('SIGCONT');
        child.kill('SIGTERM'); // the CLI stops its command's session, releases, exits
      };
      stop.addEventListener('abort', onStop, { once: true });
      const [code, signal] = await exited(child);
      stop.removeEventListener('abort', onStop);
      current = undefined;
      emit({ type: 'cli-exit', t: now(), worker: config.id, grant, code, signal });
      if (granted && signal === null && code !== 71)
        emit({ type: 'release', t: now(), worker: config.id, grant });
      if (!granted && code !== 0 && code !== 75 && !stop.aborted) process.stderr.write(`${grant}: ${stderr}`);
      killLater(grant);
      if (!granted) await sleep(100, stop);
    }
  } finally {
    ctx.holder?.handle(undefined);
    for (const timer of timers) clearTimeout(timer);
    for (const grant of [...processes.keys()]) killGroup(grant);
    // An open pipe would keep this worker alive; a process still writing to it gets EPIPE and ends.
    for (const pipe of pipes) pipe.destroy();
  }
}

type Line = TortureEvent | { ctl: 'pid'; grant: string; pid: number; start: string };

function parseLine(text: string): Line | undefined {
  try {
    return JSON.parse(text) as Line;
  } catch {
    return undefined; // not ours (a stray print)
  }
}

function readLines(child: ChildProcess, onLine: (text: string) => void): void {
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const text of lines) if (text) onLine(text);
  });
}

/** The CLI's end; its stdout stays read while an orphan or escaped member still holds it. */
function exited(child: ChildProcess): Promise<[number | null, string | null]> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve([code, signal])));
}

function sameProcess(p: GroupProcess): boolean {
  try {
    const stat = readFileSync(`/proc/${p.pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] === p.start;
  } catch {
    return false; // gone
  }
}
