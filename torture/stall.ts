import type { AcquireOptions, Lock, LockProvider } from 'fencekit';
import { now, type TortureEvent } from './history.js';

/** The fault kind a stall is recorded under (see FAULTS in nemesis.ts). */
export const STALL_KIND = 'stallAfterAcquire';

/** A stall the nemesis armed in a worker: it happens right after the worker's next acquire(). */
export class StallSwitch {
  #armedMs: number | undefined;
  #connected = false;

  /** The worker was granted once: its requests now leave at once (not queued behind a connect). */
  connected(): void {
    this.#connected = true;
  }

  /** Arms a stall of `ms` (0 disarms). */
  arm(ms: number): void {
    this.#armedMs = ms > 0 ? ms : undefined;
  }

  get armed(): boolean {
    return this.#connected && this.#armedMs !== undefined;
  }

  take(): number | undefined {
    if (!this.#connected) return undefined;
    const ms = this.#armedMs;
    this.#armedMs = undefined;
    return ms;
  }
}

/**
 * The provider as the worker's code sees it: the same, except that an armed stall blocks the
 * event loop right after acquire() was called (a GC pause): the request is on its way, but its
 * reply is read only after the lease it grants has run out.
 *
 * Where in the event loop matters. The call and the stall run as two timers of one timers phase:
 * the call's first steps (up to its request's write) run as microtasks between the two, and after
 * the stall the loop polls sockets before it runs timers again, so the reply is read before the
 * call's own deadline timer can fire, as after a real pause (SIGSTOP stops a process in its poll).
 * A stall in a later phase would let the deadline timer win and turn the late grant into a retry.
 * The worker records the stall as a fault: the checker distrusts the worker's view while it stalled.
 */
export function stallingProvider(
  real: LockProvider,
  stalls: StallSwitch,
  worker: string,
  emit: (event: TortureEvent) => void,
  /** Sees every lock acquire() resolves with (runAsLeader's included). */
  onLock: (lock: Lock) => void = () => undefined,
): LockProvider {
  const stalled = (key: string, options: AcquireOptions | undefined, ms: number) =>
    new Promise<Lock>((resolve, reject) => {
      setTimeout(() => real.acquire(key, options).then(resolve, reject), 1);
      setTimeout(() => emit(stall(ms, worker)), 1);
    });
  const acquire: LockProvider['acquire'] = async (key, options) => {
    const ms = stalls.take();
    const lock = await (ms === undefined ? real.acquire(key, options) : stalled(key, options, ms));
    onLock(lock);
    return lock;
  };
  // Everything else is the real provider's own, bound to it (its methods use private fields).
  return new Proxy(real, {
    get(target, property) {
      if (property === 'acquire') return acquire;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** Blocks this thread for `ms`: nothing else of the process runs, timers and sockets included. */
function stall(ms: number, worker: string): TortureEvent {
  const t = now();
  // Blocked, not busy: nothing of this process runs, and the core stays free for the others.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  return {
    type: 'fault',
    t,
    tEnd: now(),
    kind: STALL_KIND,
    target: `${worker} for ${ms} ms`,
    pausedWorkers: [worker],
    workers: [worker],
  };
}
