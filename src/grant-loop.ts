import { jitteredDelays, sleepUnlessWoken } from './backoff.js';
import { AbortError, BackendUnavailableError, LockTimeoutError } from './errors.js';
import type { OwnedLock } from './ownership.js';
import { linkSignals } from './signals.js';
import type { GrantKind, ProviderTelemetry } from './telemetry/telemetry.js';
import { longTimeout } from './timers.js';
import type { ValidAcquireOptions } from './validate.js';

/** What a provider lends the recipes that run on this loop (semaphores, read-write locks). */
export interface GrantContext {
  backend: string;
  ttlMs: number;
  /** The provider's options gave ttlMs (rather than the built-in default). */
  ttlGiven?: boolean;
  /** Told of a granted request's given ttlMs: the provider says once if it cannot honour it. */
  noteTtl?: (ttlMs: number) => void;
  waitMs: number;
  callTimeoutMs: number;
  /** The provider's close signal: fails waiters, releases grants. */
  closeSignal: AbortSignal;
  /** Hands close() work to wait for (bounded there): pending requests, releases on close. */
  track?: (work: Promise<unknown>) => void;
  /** The provider's metrics, events and logs. */
  telemetry?: ProviderTelemetry;
}

/** One acquire as the loop runs it: the validated options, and one attempt at the backend. */
export interface GrantCall {
  /** The recipe's name (an error's key). */
  name: string;
  /** For errors: `acquire permit of "jobs"`. */
  what: string;
  kind: GrantKind;
  options: ValidAcquireOptions;
  /** Whether to wait at all (acquire) or try once (tryAcquire). */
  wait: boolean;
  /** One request to the adapter (its `request` contract); `wait` false when waitMs is 0. */
  attempt(wait: boolean, cancel: AbortSignal): Promise<OwnedLock | null>;
  /**
   * Whether the backend answered before: from then on, outages are ridden through. Default: it
   * answered a call of this provider's recipes (see noteReached).
   */
  reached?(): boolean;
  /** Whether the backend is reachable as far as the adapter knows. Default: reachable. */
  reachable?(): boolean;
}

const TIMED_OUT = Symbol('timed out');

/**
 * Providers (by their close signal) whose backend answered a recipe's call: from then on, outages
 * are ridden through. Shared by every recipe of a provider, as the base provider's flag is by its
 * locks.
 */
const reachedProviders = new WeakSet<AbortSignal>();

/** The backend of the provider whose context this is answered (an inspect, a grant). */
export function noteReached(ctx: GrantContext): void {
  reachedProviders.add(ctx.closeSignal);
}

/**
 * The acquire loop of semaphores and read-write locks: one derived signal per request (caller,
 * waitMs, close), riding through outages within waitMs once the backend was reached, never handing
 * out a grant already lost, releasing a grant that arrives after close. Resolves with the grant
 * (counted by telemetry) or null when a try finds it busy; the caller tracks it.
 */
export function obtainGrant(ctx: GrantContext, call: GrantCall): Promise<OwnedLock | null> {
  const telemetry = ctx.telemetry;
  if (!telemetry) return obtain(ctx, call);
  const done = telemetry.waitStarted(call.kind, call.name, call.wait && call.options.waitMs !== 0);
  const obtaining = obtain(ctx, call);
  obtaining.then(done, done);
  return obtaining;
}

async function obtain(ctx: GrantContext, call: GrantCall): Promise<OwnedLock | null> {
  const { options, what } = call;
  if (ctx.closeSignal.aborted) throw ctx.closeSignal.reason;
  if (options.signal?.aborted) throw new AbortError(what, options.signal.reason);
  const shouldWait = call.wait && options.waitMs > 0;
  const linked = linkSignals([options.signal, ctx.closeSignal]);
  const cancelTimer =
    shouldWait && Number.isFinite(options.waitMs)
      ? longTimeout(() => linked.abort(TIMED_OUT), options.waitMs)
      : undefined;
  const cancel = linked.signal;
  const delays = jitteredDelays({ initialMs: 50, maxMs: Math.max(50, ctx.callTimeoutMs / 2) });
  let unavailable: BackendUnavailableError | undefined;
  const cancelled = (): Error => {
    const reason: unknown = cancel.reason;
    if (reason === ctx.closeSignal.reason) return reason as Error;
    if (reason !== TIMED_OUT) return new AbortError(what, reason);
    if (unavailable) return unavailable;
    if (call.reachable?.() === false) {
      return new BackendUnavailableError(
        `the ${ctx.backend} backend did not answer within ${options.waitMs} ms (${what})`,
      );
    }
    return new LockTimeoutError(call.name, options.waitMs);
  };
  try {
    for (;;) {
      let lock: OwnedLock | null;
      try {
        const requested = call.attempt(shouldWait, cancel);
        ctx.track?.(requested); // close() lets it take its queue entry back first
        lock = await requested;
      } catch (error) {
        if (cancel.aborted) throw cancelled();
        // Ride through an outage while there is time to wait, once the backend was reached at all.
        const reached = call.reached?.() ?? reachedProviders.has(ctx.closeSignal);
        if (error instanceof BackendUnavailableError && shouldWait && reached) {
          unavailable = error;
          await sleepUnlessWoken(delays.next().value, cancel).done.catch(() => undefined);
          if (cancel.aborted) throw cancelled();
          continue;
        }
        throw error;
      }
      noteReached(ctx);
      unavailable = undefined;
      if (lock === null) return null;
      if (!lock.held) {
        // Born lost (its answer came after the lease could have passed on): not a grant.
        await lock.release().catch(() => undefined);
        if (!shouldWait) return null;
        if (cancel.aborted) throw cancelled();
        continue;
      }
      if (ctx.closeSignal.aborted) {
        await lock.release().catch(() => undefined);
        throw ctx.closeSignal.reason;
      }
      ctx.telemetry?.granted(lock, call.kind, call.name, options.owner);
      if (options.ttlGiven) ctx.noteTtl?.(options.ttlMs);
      return lock;
    }
  } finally {
    cancelTimer?.();
    linked.dispose();
  }
}

/**
 * Grants a recipe holds, released when the provider closes. It listens to the close signal only
 * while something is held: recipes are cheap to create.
 */
export class HeldGrants {
  readonly #ctx: GrantContext;
  readonly #held = new Set<OwnedLock>();
  readonly #onClose = (): void => {
    for (const lock of this.#held) {
      const released = lock.release().catch(() => undefined);
      this.#ctx.track?.(released); // close() waits for it before the connections go
    }
  };

  constructor(ctx: GrantContext) {
    this.#ctx = ctx;
  }

  add(lock: OwnedLock): void {
    if (this.#held.size === 0) {
      this.#ctx.closeSignal.addEventListener('abort', this.#onClose, { once: true });
    }
    this.#held.add(lock);
    lock.onRelease(() => {
      this.#held.delete(lock);
      if (this.#held.size === 0) this.#ctx.closeSignal.removeEventListener('abort', this.#onClose);
    });
  }
}
