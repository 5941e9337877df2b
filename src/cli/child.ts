import { spawn } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { longTimeout } from '../timers.js';
import { EXIT, exitCodeForSignal } from './exit-codes.js';
import type { Interrupts } from './interrupts.js';
import { printError, warn } from './output.js';
import { scanSession, sessionIsEmpty, signalGroup } from './session.js';

export interface ChildRun {
  /** Program and arguments. */
  command: string[];
  /** Added to the CLI's own environment. */
  env: Record<string, string>;
  /**
   * The grant's signal (derived with linkSignals): on abort SIGKILL at once. The loss signal fires
   * only about a round trip before the lease can run out on the server and the next holder start:
   * no time is left for a grace then.
   */
  stop: AbortSignal;
  /** Stops while the grant still holds (the CLI signalled, left-over processes): SIGKILL this long after the signal. */
  graceMs: number;
  interrupts: Interrupts;
  /** Says why the command is being stopped (stderr). */
  onStop: (reason: unknown) => void;
}

/** How often the CLI looks whether the command's session is empty while it stops it. */
const SESSION_POLL_MS = 100;
/**
 * How long the session may take to empty after SIGKILL before the CLI says it gave up. Only a
 * process in uninterruptible sleep (or one it may not signal) takes longer.
 */
const AFTER_KILL_MS = 5_000;

/**
 * Runs the command while `stop` is not aborted and resolves with the CLI's exit code for it: the
 * command's own code, 128 + n when signal n ended it, 127/126 when it could not be started.
 * Resolves only once every process of the command's session is gone, so the caller may release
 * then: whatever stops it (the grant's loss, a signal to the CLI, the command's own exit with a
 * `&` job left behind), the session gets a signal, SIGKILL after graceMs (at once after a loss),
 * and is waited for.
 * Never starts it when `stop` has already aborted or the CLI was signalled (the caller checks and
 * so does this).
 */
export function runChild(run: ChildRun): Promise<number> {
  if (run.stop.aborted) return Promise.reject(run.stop.reason);
  // A signal that came while acquiring: the grant may have been won in the same instant, but the
  // user asked the CLI to stop, so the command does not start (the caller releases).
  if (run.interrupts.signal.aborted) return Promise.reject(run.interrupts.signal.reason);
  const [file = '', ...args] = run.command;
  // A session of its own: a lost lock must stop the command's children too (a shell script's
  // `sleep`, a pipeline, a job control shell's groups), not only the process we started.
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
  const sid = child.pid;
  return new Promise<number>((resolve) => {
    const session = new CommandSession(sid, run.graceMs, (code) => {
      run.stop.removeEventListener('abort', onStop);
      process.off('uncaughtException', onCrash);
      process.off('unhandledRejection', onCrash);
      run.interrupts.childExited();
      resolve(code);
    });
    const onStop = () => {
      run.onStop(run.stop.reason);
      session.kill();
    };
    // A bug of the CLI while the command runs: the grant cannot be trusted to end well, so the
    // command is killed and the CLI leaves without releasing once it is gone (abandon).
    const onCrash = (error: unknown) => {
      printError(`fencekit: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      session.abandon(EXIT.failure);
    };
    process.on('uncaughtException', onCrash);
    process.on('unhandledRejection', onCrash);
    run.stop.addEventListener('abort', onStop, { once: true });
    run.interrupts.childStarted((signal) => session.stop(signal));
    child.on('exit', (code, signal) =>
      session.leaderExited(code ?? (signal ? exitCodeForSignal(signal) : EXIT.failure)),
    );
    child.on('error', () => undefined); // a failed kill after the start: the session is waited for anyway
  });
}

/**
 * Stops the command's session and reports its end once the session is empty: the first stop()
 * sends its signal, arms SIGKILL after graceMs and watches the session; the leader's exit with
 * the session not empty is a stop too (what the command left behind must not outlive the grant).
 * When the session outlives SIGKILL, or the CLI itself fails, the CLI still waits for the session
 * to empty and then exits without releasing (giveUp, abandon): the grant is never freed while a
 * process of the command may run, neither by a release nor by the end of the CLI's connection.
 */
class CommandSession {
  readonly #sid: number;
  readonly #graceMs: number;
  readonly #ended: (code: number) => void;
  /**
   * Process groups seen in the session (the leader's first) that the last look did not show to be
   * gone from it: a group id is free once its group is empty and may come back as another group.
   */
  #groups: Set<number>;
  #leaderCode: number | undefined;
  #stopping = false;
  #killed = false;
  /** Set when the CLI will exit with this code, without releasing, once the session is empty. */
  #exitWithoutRelease: number | undefined;
  #watching = false;
  #done = false;
  #cancelKill: (() => void) | undefined;
  #giveUpTimer: NodeJS.Timeout | undefined;

  constructor(sid: number, graceMs: number, ended: (code: number) => void) {
    this.#sid = sid;
    this.#graceMs = graceMs;
    this.#ended = ended;
    this.#groups = new Set([sid]);
  }

  /** Sends signal to the whole session; the first call also starts the escalation and the watch. */
  stop(signal: NodeJS.Signals): void {
    if (this.#done) return;
    this.#signal(signal);
    if (this.#stopping) return;
    this.#stopping = true;
    // longTimeout: a --grace past 2^31 ms must not become a 1 ms timer.
    this.#cancelKill = longTimeout(() => this.#kill(), this.#graceMs);
    this.#watch();
  }

  /** The leader is reaped: its code is the command's. */
  leaderExited(code: number): void {
    this.#leaderCode = code;
    this.#watch();
  }

  /**
   * SIGKILL now, and to every group found later (a lost grant: no time for a grace); the caller
   * releases once the session is empty, or the CLI gives up AFTER_KILL_MS later.
   */
  kill(): void {
    if (this.#done) return;
    this.#stopping = true;
    this.#cancelKill?.();
    this.#kill();
    this.#watch();
  }

  /** SIGKILL now; exit with code, without releasing, once the session is empty. */
  abandon(code: number): void {
    if (this.#done) return;
    this.#exitWithoutRelease ??= code;
    this.#stopping = true;
    this.#cancelKill?.();
    this.#kill();
    this.#watch();
  }

  #kill(): void {
    if (this.#killed) return;
    this.#killed = true;
    this.#signal('SIGKILL');
    this.#giveUpTimer = setTimeout(() => this.#giveUp(), AFTER_KILL_MS);
  }

  /** The leader's group at once, then every other group a look at the session finds a process in. */
  #signal(signal: NodeJS.Signals): void {
    signalGroup(this.#sid, signal);
    void scanSession(this.#sid, this.#groups).then(
      (scan) => {
        this.#groups = scan.known;
        for (const pgid of scan.groups) if (pgid !== this.#sid) signalGroup(pgid, signal);
      },
      () => undefined, // the watch looks again
    );
  }

  /** Looks at the session every SESSION_POLL_MS until it ended (one look at a time). */
  #watch(): void {
    if (this.#watching) return;
    this.#watching = true;
    void (async () => {
      while (!this.#done) {
        await this.#look().catch(() => undefined); // a failed look is no verdict: look again
        if (this.#done) return;
        await delay(SESSION_POLL_MS);
      }
    })();
  }

  async #look(): Promise<void> {
    const scan = await scanSession(this.#sid, this.#groups);
    this.#groups = scan.known;
    // Killed already: a process that forked into a new group since gets SIGKILL too.
    if (this.#killed) for (const pgid of scan.groups) signalGroup(pgid, 'SIGKILL');
    if (this.#leaderCode === undefined) return;
    if (!scan.live && (await sessionIsEmpty(this.#sid, this.#groups))) {
      this.#end(this.#leaderCode);
      return;
    }
    if (this.#stopping) return;
    warn(
      `the command exited (${this.#leaderCode}) but processes of its session ${this.#sid} still run; ` +
        `sending them SIGTERM (SIGKILL after ${this.#graceMs} ms)`,
    );
    this.stop('SIGTERM');
  }

  #end(code: number): void {
    this.#done = true;
    this.#cancelKill?.();
    clearTimeout(this.#giveUpTimer);
    if (this.#exitWithoutRelease === undefined) {
      this.#ended(code);
      return;
    }
    warn(`the command's processes are gone; leaving without releasing (exit ${this.#exitWithoutRelease})`);
    process.exit(this.#exitWithoutRelease);
  }

  /**
   * The session outlived SIGKILL. Releasing now would let the next holder in beside what is left,
   * and so would leaving (on PostgreSQL the lock ends with the CLI's connection): the CLI keeps the
   * grant and the connection, keeps looking, and exits 71 without releasing once the session is
   * empty (a lease ends the grant then).
   */
  #giveUp(): void {
    if (this.#done) return;
    this.#exitWithoutRelease ??= EXIT.groupNotEmptied;
    warn(
      `processes of the command's session ${this.#sid} are still there ${AFTER_KILL_MS} ms after SIGKILL ` +
        '(uninterruptible sleep, or a process the CLI may not signal); holding the grant until they ' +
        `are gone, then leaving without releasing (exit ${this.#exitWithoutRelease})`,
    );
  }
}
