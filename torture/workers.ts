import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import type { LockProvider, MemoryLockProvider } from 'fencekit';
import { now, type TortureEvent } from './history.js';
import { StallSwitch } from './stall.js';
import { runWorker, type WorkerConfig } from './worker.js';
import { workload } from './workloads/index.js';

/** One running worker, as the nemesis sees it. */
export interface WorkerHandle {
  readonly id: string;
  readonly config: WorkerConfig;
  /** SIGSTOP / SIGCONT; absent for in-process workers. */
  freeze?: (frozen: boolean) => void;
  /** memory:// only: cut or heal this worker's link to the in-process server. */
  partition?: (cut: boolean) => void;
  /** Stall the worker's event loop for `ms` right after its next acquire() call (0 disarms). */
  stallAfterAcquire(ms: number): void;
  /** Dies without clean-up: SIGKILL, or the memory client's simulated crash. */
  crash(): void;
  /** crash() and freeze() reach the holder process the worker runs, not the worker (see Workload.holderIsChild). */
  readonly survivesCrash?: boolean;
  /** Asks it to stop and close; bounded. */
  stop(): Promise<void>;
}

/**
 * Starts workers (forked processes, or in-process for memory://), records everything they report,
 * and knows who currently holds a grant (for faults aimed at holders).
 */
export class WorkerPool {
  readonly history: TortureEvent[] = [];
  readonly workers = new Map<string, WorkerHandle>();
  /** worker → grant it is inside of (from grant to release or crash). */
  readonly holding = new Map<string, string>();
  readonly #listeners = new Set<(event: TortureEvent) => void>();

  constructor(readonly workerScript: string) {}

  record(event: TortureEvent): void {
    this.history.push(event);
    if (event.type === 'grant') this.holding.set(event.worker, event.grant);
    if (event.type === 'release' || event.type === 'crash') this.holding.delete(event.worker);
    for (const listener of this.#listeners) listener(event);
  }

  listen(listener: (event: TortureEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  start(config: WorkerConfig, inProcess: boolean): WorkerHandle {
    const handle = inProcess ? this.#startInProcess(config) : this.#startProcess(config);
    this.workers.set(config.id, handle);
    return handle;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.workers.values()].map((w) => w.stop()));
  }

  #startProcess(config: WorkerConfig): WorkerHandle {
    const child: ChildProcess = fork(this.workerScript, [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let expectedExit = false;
    let exited = false;
    const exit = once(child, 'exit').then(() => {
      exited = true;
    });
    child.on('message', (event: TortureEvent) => this.record(event));
    child.on('error', () => undefined);
    child.on('exit', (code, signal) => {
      this.workers.delete(config.id);
      if (!expectedExit)
        this.record({ type: 'crash', t: now(), worker: config.id, detail: `exit ${code ?? signal}` });
    });
    child.send({ type: 'start', config });
    const signalChild = (signal: NodeJS.Signals) => {
      if (!exited) child.kill(signal);
    };
    const send = (message: object) => {
      if (child.connected) child.send(message);
    };
    const forwarded = workload(config.workload).holderIsChild === true;
    return {
      id: config.id,
      config,
      survivesCrash: forwarded,
      freeze: (frozen) =>
        forwarded ? send({ type: 'freeze', frozen }) : signalChild(frozen ? 'SIGSTOP' : 'SIGCONT'),
      stallAfterAcquire: (ms) => send({ type: 'stall', ms }),
      crash: () => (forwarded ? send({ type: 'crash' }) : signalChild('SIGKILL')),
      stop: async () => {
        expectedExit = true;
        signalChild('SIGCONT');
        if (child.connected) child.send({ type: 'stop' });
        const bounded = await Promise.race([exit.then(() => true), sleep(15_000).then(() => false)]);
        if (!bounded) {
          this.record({ type: 'crash', t: now(), worker: config.id, detail: 'did not stop within 15 s' });
          signalChild('SIGKILL');
          await exit;
        }
      },
    };
  }

  #startInProcess(config: WorkerConfig): WorkerHandle {
    const stop = new AbortController();
    const stalls = new StallSwitch();
    let provider: MemoryLockProvider | undefined;
    let dead = false;
    const emit = (event: TortureEvent) => {
      if (!dead) this.record(event);
    };
    const done = runWorker(
      config,
      emit,
      stop.signal,
      (p: LockProvider) => {
        provider = p as MemoryLockProvider;
      },
      stalls,
    ).catch((error: unknown) => emit({ type: 'crash', t: now(), worker: config.id, detail: String(error) }));
    return {
      id: config.id,
      config,
      partition: (cut) => provider?.simulate.partition(cut),
      stallAfterAcquire: (ms) => stalls.arm(ms),
      crash: () => {
        // The client vanishes: nothing renewed or released; its loop runs on unheard, then stops.
        provider?.simulate.crash();
        this.record({ type: 'crash', t: now(), worker: config.id, detail: 'simulated crash' });
        dead = true;
        this.workers.delete(config.id);
        stop.abort();
      },
      stop: async () => {
        stop.abort();
        await done;
        this.workers.delete(config.id);
      },
    };
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
