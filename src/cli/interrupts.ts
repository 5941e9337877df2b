import type { ChildProcess } from 'node:child_process';
import { AbortError } from '../errors.js';
import { signalGroup } from './child.js';
import { exitCodeForSignal } from './exit-codes.js';

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/**
 * SIGINT and SIGTERM sent to the CLI. While a command runs they are forwarded to it, and the CLI
 * stops once it has exited (its exit code is the CLI's); otherwise they stop the CLI's waiting
 * (`signal` aborts) and it exits 128 + n after cleaning up.
 */
export class Interrupts {
  readonly #stop = new AbortController();
  #child: ChildProcess | undefined;
  #received: NodeJS.Signals | undefined;
  #stoppedWaiting = false;
  readonly #onSignal = (signal: NodeJS.Signals) => {
    this.#received = signal;
    if (this.#child && this.#child.exitCode === null && this.#child.signalCode === null) {
      signalGroup(this.#child, signal); // its own group: a terminal's Ctrl-C reaches it only through us
    } else if (this.#stop.signal.aborted) {
      // A second signal while cleaning up (a release or close that hangs): leave now, the lease frees it.
      process.exit(exitCodeForSignal(signal));
    } else {
      this.#stoppedWaiting = true;
      this.#stop.abort(new AbortError(`fencekit (${signal})`, signal));
    }
  };

  constructor() {
    for (const s of FORWARDED) process.on(s, this.#onSignal);
  }

  /** Aborted when the CLI should stop waiting and leave. */
  get signal(): AbortSignal {
    return this.#stop.signal;
  }

  /** The first signal the CLI received, if any. */
  get received(): NodeJS.Signals | undefined {
    return this.#received;
  }

  /** A signal came while no command ran: the CLI exits 128 + n, not with a command's code. */
  get stoppedWaiting(): boolean {
    return this.#stoppedWaiting;
  }

  /** Signals go to this process until childExited(). */
  childStarted(child: ChildProcess): void {
    this.#child = child;
  }

  /** A signal forwarded to the command now stops the CLI too. */
  childExited(): void {
    this.#child = undefined;
    if (this.#received) this.#stop.abort(new AbortError(`fencekit (${this.#received})`, this.#received));
  }

  dispose(): void {
    for (const s of FORWARDED) process.off(s, this.#onSignal);
  }
}
