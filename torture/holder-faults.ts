/** How a worker applies the faults aimed at its holder when the holder is a process it runs. */
export interface HolderFaultHandlers {
  /** SIGSTOP (true) / SIGCONT (false) the holder process. */
  freeze(frozen: boolean): void;
  /** SIGKILL the holder process; the worker runs on. */
  crash(): void;
}

/**
 * The nemesis's freeze and kill for a workload whose lock holder is not the worker process
 * (cli: the `fencekit lock` process the worker starts). The runner sends them to the worker; the
 * workload's loop says how to apply them (handle); before that, or without a holder, they do nothing.
 */
export class HolderFaults {
  #handlers: HolderFaultHandlers | undefined;

  handle(handlers: HolderFaultHandlers | undefined): void {
    this.#handlers = handlers;
  }

  freeze(frozen: boolean): void {
    this.#handlers?.freeze(frozen);
  }

  crash(): void {
    this.#handlers?.crash();
  }
}
