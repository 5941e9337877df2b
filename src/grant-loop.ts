import { jitteredDelays, sleepUnlessWoken } from './backoff.js';
import { monotonicNow } from './clock.js';
import { callWithin } from './deadline.js';
import {
  AbortError,
  BackendUnavailableError,
  LockTimeoutError,
  NotImplementedError,
  ProviderClosedError,
} from './errors.js';
import type { OwnedLock } from './ownership.js';
import { linkSignals } from './signals.js';
import type { GrantKind, ProviderTelemetry } from './telemetry/telemetry.js';
import { longTimeout } from './timers.js';
import type { ValidAcquireOptions } from './validate.js';

/** What a provider lends everything that runs on this loop: its locks, semaphores, read-write locks. */
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

/**
 * What every request to an adapter carries, whatever it asks for (a lock, permits, a read or the
 * write): the grant's terms and whether to wait in the backend's queue.
 */
export interface GrantRequest {
  ttlMs: number;
  /** Whether ttlMs was given (by the acquire or the provider's options) rather than defaulted. */
  ttlGiven: boolean;
  owner: string | undefined;
  /** Unique per request (and so per grant): the backend's id of the grant. */
  ownerToken: string;
  /** Lock-delay of the grant (0 = none): how long it keeps what it held after it is lost. */
  lockDelayMs: number;
  wait: boolean;
  /** When the acquire was asked for (monotonic ms): its place in a queue kept by arrival. */
  askedAt: number;
}

/** The terms an acquire's validated options give a request, with a new ownerToken; `wait` is the loop's. */
export function grantTerms(options: ValidAcquireOptions): GrantRequest {
  return {
    ttlMs: options.ttlMs,
    ttlGiven: options.ttlGiven,
    owner: options.owner,
    ownerToken: crypto.randomUUID(),
    lockDelayMs: options.lockDelayMs,
    wait: false,
    askedAt: monotonicNow(),
  };
}

/**
 * The backend part of a recipe that runs on this loop (a semaphore, a read-write lock). `request`
 * contract (as for locks): resolve with the grant, or null when `wait` is false and the grant is
 * not free now. `cancel` is the request's one signal (caller, waitMs, provider close): race every
 * backend call against it and callTimeoutMs (callWithin); when it aborts, leave the queue (and
 * give back a grant that raced in), then reject. An unreachable backend is a
 * BackendUnavailableError, promptly: the wait is retried here.
 */
export interface RecipeAdapter<Request extends GrantRequest, Info> {
  request(req: Request, cancel: AbortSignal): Promise<OwnedLock | null>;
  /** What the backend holds and queues now; `signal` carries the caller's deadline. */
  inspect(signal: AbortSignal): Promise<Info>;
  /** Whether the adapter keeps lock-delay (the request's lockDelayMs); if not, a delay is refused. */
  readonly keepsLockDelay?: boolean;
  /**
   * Whether the backend is reachable as far as the adapter knows: a wait that runs out while it
   * is not ends with BackendUnavailableError instead of a timeout. Default: reachable.
   */
  reachable?(): boolean;
  /** Whether the backend answered before (in process: always). Default: tracked per provider here. */
  reached?(): boolean;
}

/** Refuses a call to a recipe of a closed provider with the provider's close reason. */
export function assertOpen(ctx: GrantContext): void {
  if (ctx.closeSignal.aborted) throw ctx.closeSignal.reason;
}

/**
 * A recipe's inspect (`what`: `inspect semaphore "jobs"`): one call to its adapter within
 * callTimeoutMs and the provider's close; its answer notes the backend reached.
 */
export async function inspectRecipe<Info>(
  ctx: GrantContext,
  adapter: Pick<RecipeAdapter<GrantRequest, Info>, 'inspect'>,
  what: string,
): Promise<Info> {
  assertOpen(ctx);
  const info = await callWithin((signal) => adapter.inspect(signal), {
    timeoutMs: ctx.callTimeoutMs,
    signal: ctx.closeSignal,
    what,
  });
  noteReached(ctx);
  return info;
}

/** One acquire as the loop runs it: the validated options, one attempt at the backend, and its rules. */
export interface GrantCall {
  /** The grant's name (an error's key). */
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
  /** Told each time the backend answers an attempt. Default: noteReached(ctx). */
  answered?(): void;
  /** Whether the backend is reachable as far as the adapter knows. Default: reachable. */
  reachable?(): boolean;
  /**
   * Takes the grant into the caller's keeping before it is counted and handed out, in the same
   * turn as the loop's last close check, so that close() releases it (a lock provider's held set).
   * Default: the caller keeps what the loop resolves with.
   */
  keep?(lock: OwnedLock): void;
  /**
   * Whether a caller's signal aborted with a ProviderClosedError (another provider's, a store's)
   * ends the wait with that error as it is rather than an AbortError around it (locks). The
   * provider's own close always does.
   */
  passesClosedOn?: boolean;
  /**
   * Whether the caller times the wait itself (observeWait), from before its validation so that a
   * refused acquire is counted too (locks). Default: the loop times it.
   */
  timedByCaller?: boolean;
}

const TIMED_OUT = Symbol('timed out');

/** Refuses a lock-delay the adapter does not keep (NotImplementedError) rather than grant without one. */
export function refuseUnkeptLockDelay(lockDelayMs: number, kept: boolean | undefined, where: string): void {
  if (lockDelayMs > 0 && !kept) throw new NotImplementedError(`lockDelayMs on ${where}`);
}

/** The parts of a GrantCall a recipe's adapter answers: its request, and what it knows of the backend. */
export function adapterAttempt<Request extends GrantRequest>(
  adapter: RecipeAdapter<Request, unknown>,
  request: Request,
): Pick<GrantCall, 'attempt' | 'reached' | 'reachable'> {
  return {
    attempt: (wait, cancel) => adapter.request({ ...request, wait }, cancel),
    ...(adapter.reached ? { reached: () => adapter.reached?.() ?? true } : {}),
    reachable: () => adapter.reachable?.() ?? true,
  };
}

/**
 * Providers (by their close signal) whose backend answered a recipe's call: from then on, outages
 * are ridden through. Shared by every recipe of a provider; a provider's locks keep their own flag
 * (GrantCall.reached and answered).
 */
const reachedProviders = new WeakSet<AbortSignal>();

/** The backend of the provider whose context this is answered (an inspect, a grant). */
export function noteReached(ctx: GrantContext): void {
  reachedProviders.add(ctx.closeSignal);
}

/**
 * Times a wait for a grant and counts its waiters (no extra await): `obtain` settles with the
 * outcome (the grant, null for a try that found it busy, or the error).
 */
export function observeWait<T>(
  ctx: GrantContext,
  kind: GrantKind,
  name: string,
  waiting: boolean,
  obtain: () => Promise<T>,
): Promise<T> {
  const done = ctx.telemetry?.waitStarted(kind, name, waiting);
  const obtaining = obtain();
  if (done) obtaining.then(done, done);
  return obtaining;
}

/**
 * The acquire loop of locks, semaphores and read-write locks: one signal per request (caller,
 * waitMs, close), riding through outages within waitMs once the backend was reached, never handing
 * out a grant already lost, releasing a grant that arrives after close. Resolves with the grant
 * (counted by telemetry) or null when a try finds it busy.
 */
export function obtainGrant(ctx: GrantContext, call: GrantCall): Promise<OwnedLock | null> {
  if (call.timedByCaller) return obtain(ctx, call);
  const waiting = call.wait && call.options.waitMs !== 0;
  return observeWait(ctx, call.kind, call.name, waiting, () => obtain(ctx, call));
}

async function obtain(ctx: GrantContext, call: GrantCall): Promise<OwnedLock | null> {
  const { options, what } = call;
  assertOpen(ctx);
  if (options.signal?.aborted) throw new AbortError(what, options.signal.reason);
  const shouldWait = call.wait && options.waitMs > 0;

  // When it gives up: when the request's one signal aborts, for the caller, waitMs or close().
  // Without a caller's signal or a time limit that is the close signal itself: a derived signal
  // per request is a large part of what an in-process acquire costs.
  const timeLimited = shouldWait && Number.isFinite(options.waitMs);
  const linked = options.signal || timeLimited ? linkSignals([options.signal, ctx.closeSignal]) : undefined;
  const cancel = linked?.signal ?? ctx.closeSignal;
  const cancelTimer = timeLimited ? longTimeout(() => linked?.abort(TIMED_OUT), options.waitMs) : undefined;
  let unavailable: BackendUnavailableError | undefined;
  const cancelled = (): Error => {
    const reason: unknown = cancel.reason;
    if (reason === ctx.closeSignal.reason) return reason as Error;
    if (call.passesClosedOn && reason instanceof ProviderClosedError) return reason;
    if (reason !== TIMED_OUT) return new AbortError(what, reason);
    // The wait ran out: during an outage (or before the backend ever answered) that is what to say.
    if (unavailable) return unavailable;
    if (call.reachable?.() === false) {
      return new BackendUnavailableError(
        `the ${ctx.backend} backend did not answer within ${options.waitMs} ms (${what})`,
      );
    }
    return new LockTimeoutError(call.name, options.waitMs);
  };

  // What it retries: an outage (BackendUnavailableError), while waiting and once the backend was
  // reached at all; and a grant born lost, while waiting.
  const ridesThrough = (error: unknown): error is BackendUnavailableError =>
    error instanceof BackendUnavailableError &&
    shouldWait &&
    (call.reached?.() ?? reachedProviders.has(ctx.closeSignal));
  // How long it waits between tries: a jittered backoff after an outage, up to half a call's
  // deadline; none after a born-lost grant (the backend answered: the next try queues again).
  const delays = jitteredDelays({ initialMs: 50, maxMs: Math.max(50, ctx.callTimeoutMs / 2) });

  try {
    for (;;) {
      let lock: OwnedLock | null;
      try {
        const requested = call.attempt(shouldWait, cancel);
        ctx.track?.(requested); // close() lets it take its queue entry back first
        lock = await requested;
      } catch (error) {
        if (cancel.aborted) throw cancelled();
        if (!ridesThrough(error)) throw error;
        unavailable = error;
        await sleepUnlessWoken(delays.next().value, cancel).done.catch(() => undefined); // an abort is read below
        if (cancel.aborted) throw cancelled();
        continue;
      }
      if (call.answered) call.answered();
      else noteReached(ctx);
      unavailable = undefined;
      if (lock === null) return null;
      const margin = handOutMarginMs(options.ttlMs);
      if (!lock.heldFor(margin)) {
        // Born lost (its answer came after the lease could have passed on), or about to be: not a
        // grant.
        const aboutToLapse = lock.held;
        await lock.release().catch(() => undefined); // a release that fails leaves a lost grant to its lease
        if (!shouldWait) return null;
        // About to lapse: within the margin its lease or session is renewed or lost; asked again at
        // once, the backend would answer with a grant refused the same way.
        if (aboutToLapse) await sleepUnlessWoken(margin, cancel).done.catch(() => undefined);
        if (cancel.aborted) throw cancelled();
        continue;
      }
      if (ctx.closeSignal.aborted) {
        await lock.release().catch(() => undefined); // its lease ends it; the caller hears of the close
        throw ctx.closeSignal.reason;
      }
      call.keep?.(lock);
      ctx.telemetry?.granted(lock, call.kind, call.name, options.owner);
      if (options.ttlGiven) ctx.noteTtl?.(options.ttlMs);
      return lock;
    }
  } finally {
    cancelTimer?.();
    linked?.dispose();
  }
}

/**
 * How much of its confirmed lease a grant must have left to be handed out: the caller reads its
 * signal a few promise steps later, and a process descheduled in between (a loaded machine) must
 * not hand it a grant that lapsed meanwhile. A tenth of the ttl, at most 100 ms.
 */
export function handOutMarginMs(ttlMs: number): number {
  return Math.min(100, ttlMs / 10);
}

/**
 * Grants a recipe holds, released when the provider closes. It listens to the close signal only
 * while something is held: recipes are cheap to create.
 */
export class HeldGrants {
  readonly #ctx: GrantContext;
  readonly #held = new Set<Pick<OwnedLock, 'release' | 'onRelease'>>();
  readonly #onClose = (): void => {
    for (const lock of this.#held) {
      const released = lock.release().catch(() => undefined);
      this.#ctx.track?.(released); // close() waits for it before the connections go
    }
  };

  constructor(ctx: GrantContext) {
    this.#ctx = ctx;
  }

  /**
   * Holds `lock` until it is released or the provider closes. Closed already (close() ran between
   * the loop's last check and here): the grant is released and the close's reason thrown, so it is
   * neither handed out nor left to its lease.
   */
  add(lock: Pick<OwnedLock, 'release' | 'onRelease'>): void {
    if (this.#ctx.closeSignal.aborted) {
      this.#ctx.track?.(lock.release().catch(() => undefined));
      throw this.#ctx.closeSignal.reason;
    }
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
