import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { constants } from 'node:os';
import { resolve } from 'node:path';

const cliPath = resolve(import.meta.dirname, '../../dist/cli.js');

/** One `node dist/cli.js …` run, as a user starts it. */
export interface CliRun {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when stdout and stderr are complete; fails after ms. */
  closed(ms?: number): Promise<void>;
  /** The exit code (128 + n when killed by signal n); fails after ms. */
  exited(ms?: number): Promise<number>;
}

/** Starts CLI processes and kills every one still running (with its process group) in stop(). */
export class CliProcesses {
  readonly #runs: CliRun[] = [];

  start(args: string[], options: { env?: Record<string, string> } = {}): CliRun {
    const child = spawn(process.execPath, [cliPath, ...args], {
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: stop() (and a test) can kill the CLI with its command (kill -9 -PGID).
      detached: true,
    });
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    const exit = new Promise<number>((done) => {
      child.on('exit', (code, signal) => done(code ?? 128 + (signal ? constants.signals[signal] : 0)));
    });
    // Output is complete once the pipes close (the command holds them too while it runs).
    const closed = new Promise<void>((done) => child.on('close', () => done()));
    const run: CliRun = {
      child,
      stdout: () => out,
      stderr: () => err,
      closed: (ms = 5_000) =>
        withTimeout(closed, ms, () => `output of fencekit ${args.join(' ')} still open`),
      exited: (ms = 20_000) =>
        withTimeout(
          exit,
          ms,
          () => `fencekit ${args.join(' ')} still running after ${ms} ms; stderr: ${err}`,
        ),
    };
    this.#runs.push(run);
    return run;
  }

  /** Runs to the end: exit code and output. */
  async run(args: string[], options: { env?: Record<string, string> } = {}) {
    const run = this.start(args, options);
    const code = await run.exited();
    await run.closed();
    return { code, stdout: run.stdout(), stderr: run.stderr() };
  }

  /**
   * Stops every CLI still running, all at once (each has its own process group): SIGTERM first,
   * which the CLI forwards to its command's own process group, then SIGKILL to the CLI's group
   * after a second.
   */
  async stop(): Promise<void> {
    await Promise.all(this.#runs.splice(0).map(stopRun));
  }
}

async function stopRun(run: CliRun): Promise<void> {
  const { child } = run;
  if (child.pid === undefined) return;
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    await run.exited(1_000).catch(() => undefined);
  }
  killGroup(child.pid);
  await run.exited(5_000);
}

/** The CLI and whatever it started (an orphaned command too); an empty group is fine. */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(what())), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls check every 50 ms until it holds; fails with `what` after ms. */
export async function until(what: string, check: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The lines of a log file the commands append to (none yet: empty). */
export function logLines(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

/** A loopback port nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  await new Promise<void>((r) => server.close(() => r()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Whether pid runs (a zombie, killed but not reaped yet, does not). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/**
 * A command for the CLI to run: `node -e` with a script that logs `<event> <tag> <token> <pid>` lines
 * to `log` (start, and the signals it gets when `trap` is set), then waits up to holdMs and exits.
 */
export function loggingCommand(
  log: string,
  tag: string,
  holdMs: number,
  trap: 'none' | 'log-and-stay' | 'log-and-exit',
) {
  const script = `
const fs = require('node:fs');
const line = (event) => fs.appendFileSync(${JSON.stringify(log)}, event + ' ${tag} ' + process.env.FENCEKIT_FENCING_TOKEN + ' ' + process.pid + '\\n');
line('start');
for (const s of ['SIGTERM', 'SIGINT']) {
  if (${JSON.stringify(trap)} === 'log-and-stay') process.on(s, () => line(s));
  if (${JSON.stringify(trap)} === 'log-and-exit') process.on(s, () => { line(s); process.exit(5); });
}
setTimeout(() => { line('end'); }, ${holdMs});`;
  return [process.execPath, '-e', script];
}

/**
 * A command whose process group holds a member that survives SIGTERM, SIGINT and SIGHUP and appends
 * `tick` to `ticks` every 50 ms (its pid goes to `pidFile` first). The leader, a shell, waits for
 * the member to start, then either sleeps (dies of any of those signals) or, once `go` exists,
 * exits 0 and leaves the member behind.
 */
export function groupWithStubbornMember(
  files: { pidFile: string; ticks: string; go: string },
  leader: 'sleeps' | 'exits-on-go',
): string[] {
  const member = `
const fs = require('node:fs');
for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(s, () => undefined);
fs.writeFileSync(${JSON.stringify(files.pidFile)}, String(process.pid));
setInterval(() => fs.appendFileSync(${JSON.stringify(files.ticks)}, 'tick\\n'), 50);`;
  const started = `while [ ! -s ${shellQuote(files.pidFile)} ]; do sleep 0.05; done`;
  const end =
    leader === 'sleeps'
      ? 'exec sleep 1000'
      : `while [ ! -e ${shellQuote(files.go)} ]; do sleep 0.05; done; exit 0`;
  return ['sh', '-c', `"$0" -e "$1" & ${started}; ${end}`, process.execPath, member];
}

/**
 * A command for the next holder: on start it records whether the member whose pid is in `pidFile`
 * still runs (some thread of it not a zombie) and how many ticks it wrote, as JSON in `out`.
 */
export function nextHolderCommand(files: { pidFile: string; ticks: string; out: string }): string[] {
  const script = `
const fs = require('node:fs');
const pid = Number(fs.readFileSync(${JSON.stringify(files.pidFile)}, 'utf8'));
let memberAlive = false;
try {
  for (const tid of fs.readdirSync('/proc/' + pid + '/task')) {
    const stat = fs.readFileSync('/proc/' + pid + '/task/' + tid + '/stat', 'utf8');
    if (stat[stat.lastIndexOf(')') + 2] !== 'Z') memberAlive = true;
  }
} catch {}
const ticks = fs.readFileSync(${JSON.stringify(files.ticks)}, 'utf8').split('\\n').filter(Boolean).length;
fs.writeFileSync(${JSON.stringify(files.out)}, JSON.stringify({ memberAlive, ticks }));`;
  return [process.execPath, '-e', script];
}

/**
 * Like groupWithStubbornMember, with a member (python3) that ignores SIGTERM, SIGINT and SIGHUP and
 * either moves to a process group of its own first (`new-group`: setpgid, as a shell with job
 * control does; it stays in the session), or ticks from a second thread after its main thread
 * exited (`zombie-leader`: /proc shows the process as a zombie while the thread runs).
 */
export function sessionWithStubbornMember(
  python: string,
  files: { pidFile: string; ticks: string; go: string },
  member: 'new-group' | 'zombie-leader',
  leader: 'sleeps' | 'exits-on-go',
): string[] {
  const script = `
import ctypes, os, signal, threading, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)
if ${JSON.stringify(member)} == 'new-group': os.setpgid(0, 0)
def tick():
    while True:
        with open(${JSON.stringify(files.ticks)}, 'a') as f: f.write('tick\\n')
        time.sleep(0.05)
with open(${JSON.stringify(files.pidFile)}, 'w') as f: f.write(str(os.getpid()))
if ${JSON.stringify(member)} == 'zombie-leader':
    threading.Thread(target=tick).start()
    time.sleep(0.1)
    ctypes.CDLL(None).syscall(60 if os.uname().machine == 'x86_64' else 93, 0)  # exit(2): this thread only
tick()`;
  const started = `while [ ! -s ${shellQuote(files.pidFile)} ]; do sleep 0.05; done`;
  const end =
    leader === 'sleeps'
      ? 'exec sleep 1000'
      : `while [ ! -e ${shellQuote(files.go)} ]; do sleep 0.05; done; exit 0`;
  return ['sh', '-c', `"$0" -c "$1" & ${started}; ${end}`, python, script];
}

/** Whether some thread of pid runs (not a zombie, not gone). */
export function anyThreadAlive(pid: number): boolean {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tids.some((tid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      return stat[stat.lastIndexOf(')') + 2] !== 'Z';
    } catch {
      return false;
    }
  });
}

/** The session of a process, from /proc/<pid>/stat. */
export function sessionOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
