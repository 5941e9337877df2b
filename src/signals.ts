/** A signal derived from others, and the function that detaches it from them. */
export interface LinkedSignal {
  readonly signal: AbortSignal;
  /** Aborts the child alone (its own reason: a time limit, say). */
  abort(reason: unknown): void;
  /** Detaches from the parents (call it when the child's work is over); the child keeps its state. */
  dispose(): void;
}

/**
 * AbortSignal.any's semantics — the child aborts when any parent does, and at once (with that
 * parent's reason) when one already has — with an explicit detach. Why not AbortSignal.any itself:
 * on Node 20 a long-lived parent (a provider's close signal, a session's) keeps a registration for
 * every child ever derived from it, never freed, and a lock provider derives one per request: its
 * memory would grow with every request it ever served. Undefined parents are skipped.
 */
export function linkSignals(parents: ReadonlyArray<AbortSignal | undefined>): LinkedSignal {
  const controller = new AbortController();
  let listeners: Array<{ parent: AbortSignal; onAbort: () => void }> = [];
  // A read of the child reads its parents first (until disposed): a parent that finds its grant
  // lost on read (checkedOnRead) aborts, and its listener aborts the child, before the answer.
  checkedOnRead(controller.signal, () => {
    for (const { parent } of listeners) void parent.aborted;
  });
  const abort = (reason: unknown) => controller.abort(reason);
  const live = parents.filter((p): p is AbortSignal => p !== undefined);
  const already = live.find((p) => p.aborted);
  if (already) {
    controller.abort(already.reason);
    return { signal: controller.signal, abort, dispose: () => undefined };
  }
  listeners = live.map((parent) => {
    const onAbort = () => {
      controller.abort(parent.reason);
      detach();
    };
    parent.addEventListener('abort', onAbort, { once: true });
    return { parent, onAbort };
  });
  const detach = () => {
    for (const { parent, onAbort } of listeners.splice(0)) parent.removeEventListener('abort', onAbort);
  };
  return { signal: controller.signal, abort, dispose: detach };
}

/** The checks each signal runs on read (see checkedOnRead). */
const checksOf = new WeakMap<AbortSignal, Array<() => void>>();

const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')?.get as (
  this: AbortSignal,
) => boolean;
const reasonOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'reason')?.get as (
  this: AbortSignal,
) => unknown;

/**
 * Makes every read of `signal` (aborted, reason, throwIfAborted) run `check` first while it is not
 * aborted, so a check that finds the grant lost (a deadline passed while the event loop stalled
 * and its timer has not run yet) aborts it before the reader gets its answer. Apps keep signals
 * aside (`const { signal } = lock`) and pass them on: the answer must not depend on which of
 * fencekit's objects they read through. Own properties of this one signal; the platform's own uses
 * (fetch, timers) keep working, as its internal state is what abort() sets. A signal the platform
 * derives from it (AbortSignal.any, a fetch Request's) follows its 'abort' event only: read the
 * grant itself (`lock.held`, `lock.signal.throwIfAborted()`) right before a protected write.
 */
export function checkedOnRead(signal: AbortSignal, check: () => void): void {
  const installed = checksOf.get(signal);
  if (installed) {
    installed.push(check); // a derived signal with a deadline of its own: both run
    return;
  }
  const checks = [check];
  checksOf.set(signal, checks);
  const checked = () => {
    for (const run of checks) if (!abortedOf.call(signal)) run();
  };
  Object.defineProperties(signal, {
    aborted: {
      configurable: true,
      get: () => {
        checked();
        return abortedOf.call(signal);
      },
    },
    reason: {
      configurable: true,
      get: () => {
        checked();
        return reasonOf.call(signal);
      },
    },
    throwIfAborted: {
      configurable: true,
      value: () => {
        checked();
        AbortSignal.prototype.throwIfAborted.call(signal);
      },
    },
  });
}

/**
 * A signal that aborts as soon as any of `locks` is lost: the lock's own signal when there is one
 * (no derived signal to make), else one that asks each lock first on read, as a read of a lock's
 * own signal does (a deadline passed).
 */
export function anyLockLost(locks: ReadonlyArray<{ readonly signal: AbortSignal }>): AbortSignal {
  const signals = locks.map((lock) => lock.signal);
  if (signals.length === 1) return signals[0] as AbortSignal;
  const any = AbortSignal.any(signals);
  checkedOnRead(any, () => {
    for (const signal of signals) void signal.aborted;
  });
  return any;
}
