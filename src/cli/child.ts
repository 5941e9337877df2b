import { type ChildProcess, spawn } from 'node:child_process';
import { EXIT, exitCodeForSignal } from './exit-codes.js';
import type { Interrupts } from './interrupts.js';
import { warn } from './output.js';

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

/**
 * Runs the command while `stop` is not aborted and resolves with the CLI's exit code for it: the
 * command's own code, 128 + n when signal n ended it, 127/126 when it could not be started.
 * Never starts it when `stop` has already aborted (the caller checks and so does this).
 */
export function runChild(run: ChildRun): Promise<number> {
  if (run.stop.aborted) return Promise.reject(run.stop.reason);
  const [file = '', ...args] = run.command;
  // A process group of its own: a lost lock must stop the command's children too (a shell script's
  // `sleep`, a pipeline), not only the process we started, or they write on after the release.
  const child = spawn(file, args, { stdio: 'inherit', env: { ...process.env, ...run.env }, detached: true });
  run.interrupts.childStarted(child);
  let killTimer: NodeJS.Timeout | undefined;
  const onStop = () => {
    run.onStop(run.stop.reason);
    signalGroup(child, 'SIGTERM');
    killTimer = setTimeout(() => signalGroup(child, 'SIGKILL'), run.graceMs);
  };
  run.stop.addEventListener('abort', onStop, { once: true });
  return new Promise<number>((resolve) => {
    const finish = (code: number) => {
      clearTimeout(killTimer);
      run.stop.removeEventListener('abort', onStop);
      run.interrupts.childExited();
      resolve(code);
    };
    child.on('exit', (code, signal) => finish(code ?? (signal ? exitCodeForSignal(signal) : EXIT.failure)));
    child.on('error', (error: NodeJS.ErrnoException) => {
      // spawn failures only ('exit' does not follow them): the command is missing or not executable.
      if (child.pid !== undefined) return;
      warn(`cannot run ${file}: ${error.message}`);
      finish(error.code === 'ENOENT' ? EXIT.commandNotFound : EXIT.commandNotExecutable);
    });
  });
}

/** Signals the command's whole process group; the command alone when the group is gone. */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, signal);
  } catch {
    child.kill(signal);
  }
}
