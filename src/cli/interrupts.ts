import { AbortError } from '../errors.js';
import { exitCodeForSignal } from './exit-codes.js';

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * SIGINT, SIGTERM and SIGHUP sent to the CLI. While a command runs they are forwarded to its
 * session (which is then stopped as after a loss: SIGKILL after the grace, waited for until
 * empty), and the CLI stops once the session is empty (the command's exit code is the CLI's);
 * otherwise they stop the CLI's waiting (`signal` aborts) and it exits 128 + n after cleaning up.
 */
export class Interrupts {
  readonly #stop = new AbortController();
  #forward: ((signal: NodeJS.Signals) => void) | undefined;
  #received: NodeJS.Signals | undefined;
  #stoppedWaiting = false;
  readonly #onSignal = (signal: NodeJS.Signals) => {
    this.#received = signal;
    if (this.#forward) {
      this.#forward(signal); // its own session: a terminal's Ctrl-C reaches it only through us
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

  /** Signals go to forward (which stops the command's session) until childExited(). */
  childStarted(forward: (signal: NodeJS.Signals) => void): void {
    this.#forward = forward;
  }

  /** The command's session is empty: a signal forwarded to it now stops the CLI too. */
  childExited(): void {
    this.#forward = undefined;
    if (this.#received) this.#stop.abort(new AbortError(`fencekit (${this.#received})`, this.#received));
  }

  dispose(): void {
    for (const s of FORWARDED) process.off(s, this.#onSignal);
  }
}
