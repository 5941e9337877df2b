import { spawn } from 'node:child_process';
import { EXIT, exitCodeForSignal } from './exit-codes.js';
import type { Interrupts } from './interrupts.js';
import { warn } from './output.js';
import { groupIsEmpty, signalGroup } from './process-group.js';

export interface ChildRun {
  /** Program and arguments. */
  command: string[];
  /** Added to the CLI's own environment. */
  env: Record<string, string>;
  /** The grant's signal (derived with linkSignals): on abort SIGTERM, then SIGKILL after graceMs. */
  stop: AbortSignal;
  graceMs: number;
  interrupts: Interrupts;
  /** Says why the command is being stopped (stderr). */
  onStop: (reason: unknown) => void;
}

/** How often the CLI looks whether the command's group is empty while it stops it. */
const GROUP_POLL_MS = 100;
/**
 * How long the group may take to empty after SIGKILL. Only a process in uninterruptible sleep or a
 * zombie whose parent does not reap it takes longer; the CLI then gives up (giveUp).
 */
const AFTER_KILL_MS = 5_000;

/**
 * Runs the command while `stop` is not aborted and resolves with the CLI's exit code for it: the
 * command's own code, 128 + n when signal n ended it, 127/126 when it could not be started.
 * Resolves only once every process of the command's group is gone, so the caller may release
 * then: whatever stops it (the grant's loss, a signal to the CLI, the command's own exit with a
 * `&` job left behind), the group gets a signal, SIGKILL after graceMs, and is waited for.
 * Never starts it when `stop` has already aborted (the caller checks and so does this).
 */
export function runChild(run: ChildRun): Promise<number> {
  if (run.stop.aborted) return Promise.reject(run.stop.reason);
  const [file = '', ...args] = run.command;
  // A process group of its own: a lost lock must stop the command's children too (a shell script's
  // `sleep`, a pipeline), not only the process we started, or they write on after the release.
  const child = spawn(file, args, { stdio: 'inherit', env: { ...process.env, ...run.env }, detached: true });
  if (child.pid === undefined) {
    // Not started ('exit' does not follow): the command is missing or not executable.
    return new Promise<number>((resolve) =>
      child.once('error', (error: NodeJS.ErrnoException) => {
        warn(`cannot run ${file}: ${error.message}`);
        resolve(error.code === 'ENOENT' ? EXIT.commandNotFound : EXIT.commandNotExecutable);
      }),
    );
  }
  const pgid = child.pid;
  return new Promise<number>((resolve) => {
    const group = new CommandGroup(pgid, run.graceMs, (code) => {
      run.stop.removeEventListener('abort', onStop);
      run.interrupts.childExited();
      resolve(code);
    });
    const onStop = () => {
      run.onStop(run.stop.reason);
      group.stop('SIGTERM');
    };
    run.stop.addEventListener('abort', onStop, { once: true });
    run.interrupts.childStarted((signal) => group.stop(signal));
    child.on('exit', (code, signal) =>
      group.leaderExited(code ?? (signal ? exitCodeForSignal(signal) : EXIT.failure)),
    );
    child.on('error', () => undefined); // a failed kill after the start: the group is waited for anyway
  });
}

/**
 * Stops the command's process group and reports its end once the group is empty: the first
 * stop() sends its signal, arms SIGKILL after graceMs and polls the group; the leader's exit with
 * the group not empty is a stop too (what the command left behind must not outlive the grant).
 */
class CommandGroup {
  readonly #pgid: number;
  readonly #graceMs: number;
  readonly #ended: (code: number) => void;
  #leaderCode: number | undefined;
  #stopping = false;
  #done = false;
  #killTimer: NodeJS.Timeout | undefined;
  #giveUpTimer: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;

  constructor(pgid: number, graceMs: number, ended: (code: number) => void) {
    this.#pgid = pgid;
    this.#graceMs = graceMs;
    this.#ended = ended;
  }

  /** Sends signal to the whole group; the first call also starts the escalation and the waiting. */
  stop(signal: NodeJS.Signals): void {
    if (this.#done) return;
    signalGroup(this.#pgid, signal);
    if (this.#stopping) return;
    this.#stopping = true;
    this.#killTimer = setTimeout(() => this.#kill(), this.#graceMs);
    this.#poll = setInterval(() => this.#endIfEmpty(), GROUP_POLL_MS);
  }

  /** The leader is reaped: its code is the command's. */
  leaderExited(code: number): void {
    this.#leaderCode = code;
    if (this.#endIfEmpty() || this.#stopping) return;
    warn(
      `the command exited (${code}) but processes of its group ${this.#pgid} still run; ` +
        `sending them SIGTERM (SIGKILL after ${this.#graceMs} ms)`,
    );
    this.stop('SIGTERM');
  }

  #kill(): void {
    signalGroup(this.#pgid, 'SIGKILL');
    this.#giveUpTimer = setTimeout(() => this.#giveUp(), AFTER_KILL_MS);
  }

  /** Ends once the leader is reaped and nothing else of the group is left; says whether it did. */
  #endIfEmpty(): boolean {
    if (this.#done) return true;
    if (this.#leaderCode === undefined || !groupIsEmpty(this.#pgid)) return false;
    this.#done = true;
    clearTimeout(this.#killTimer);
    clearTimeout(this.#giveUpTimer);
    clearInterval(this.#poll);
    this.#ended(this.#leaderCode);
    return true;
  }

  /**
   * The group outlived SIGKILL. Releasing now would let the next holder in beside what is left,
   * so the CLI leaves at once without releasing (nor closing the provider, which releases): the
   * grant ends when its lease runs out.
   */
  #giveUp(): void {
    if (this.#done) return;
    warn(
      `processes of the command's group ${this.#pgid} are still there ${AFTER_KILL_MS} ms after SIGKILL ` +
        '(uninterruptible sleep, or a zombie its parent does not reap); leaving without releasing: ' +
        'the grant ends when its lease runs out',
    );
    process.exit(EXIT.groupNotEmptied);
  }
}
