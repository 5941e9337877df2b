import { setMaxListeners } from 'node:events';
import { metrics } from '@opentelemetry/api';
import {
  forceReleaseLine,
  forceReleaseUnknownLine,
  heldNamesUnder,
  validateForceReleaseOptions,
  validateListPrefix,
} from './admin.js';
import { withinGrace } from './cancel-grace.js';
import { DEFAULT_DRIFT_RATE } from './clock.js';
import {
  InvalidArgumentError,
  LockTimeoutError,
  NotImplementedError,
  ProviderClosedError,
} from './errors.js';
import {
  type ProviderEventListener,
  type ProviderEventName,
  ProviderEvents,
  type TtlIgnored,
} from './events.js';
import {
  type GrantContext,
  type GrantRequest,
  grantTerms,
  observeWait,
  obtainGrant,
  refuseUnkeptLockDelay,
} from './grant-loop.js';
import type { OwnedLock } from './ownership.js';
import { GenericReadWriteLock, type ReadWriteAdapter } from './read-write/core.js';
import type { ReadWriteLock } from './read-write/types.js';
import { processSecrets } from './secret-mask.js';
import type { SemaphoreContext } from './semaphore/core.js';
import type { SessionRenewalListener } from './session-liveness.js';
import { secretsIn } from './telemetry/redact.js';
import { ProviderTelemetry, TELEMETRY, type TelemetryOptions } from './telemetry/telemetry.js';
import type {
  AcquireOptions,
  BackendName,
  ForceReleaseOptions,
  HolderInfo,
  Lock,
  LockInfo,
  LockProvider,
  QueuedWaiter,
  QueueOptions,
} from './types.js';
import { validateAcquireOptions, validateKey, validateTtlMs, validateWaitMs } from './validate.js';
import { validateQueueOptions } from './waiter-queue.js';

/** What an adapter is asked for: one grant of `key`, waiting in the backend's queue if `wait`. */
export interface LockRequest extends GrantRequest {
  key: string;
  /**
   * Whether ttlMs was given (by the acquire or the provider's options) rather than defaulted:
   * session backends that can honour it (etcd) then use a session of that TTL.
   */
  ttlGiven: boolean;
  /** Backend-specific value to store with the grant instead of the owner record (election proposals). */
  payload?: string;
  /**
   * How long the name stays ungranted after this grant is lost (not released): stored with the
   * grant. 0 (no delay) costs nothing extra. Only adapters that set `lockDelaySupported` see > 0.
   */
  lockDelayMs: number;
}

/** Options every built-in provider takes: defaults for its acquires, its deadlines and telemetry. */
export interface ProviderDefaults extends TelemetryOptions {
  /**
   * ttlMs of acquires that give none (see AcquireOptions.ttlMs). Default 15 000 ms; on etcd, when
   * neither the acquire nor this gives one, sessionTtlMs governs instead.
   */
  ttlMs?: number;
  /** How long acquire waits when it gives no waitMs. Default: without limit. */
  waitMs?: number;
  /** Clock-rate drift the loss signal allows for (0..0.5). Default 0.01 (1 %). */
  driftRate?: number;
  /**
   * Deadline of every call to the backend, and what close() may spend on clean-up (plus 1 s).
   * Default 5000 ms (Redlock: 200 ms per instance).
   */
  callTimeoutMs?: number;
}

export const DEFAULT_CALL_TIMEOUT_MS = 5_000;
/** What close() may spend on shutdown() after the clean-up phase. */
const SHUTDOWN_GRACE_MS = 1_000;

/** A signal many waiting requests listen to at once is not a leak: no listener-count warning. */
function unlimitedListeners(controller: AbortController): AbortController {
  setMaxListeners(0, controller.signal);
  return controller;
}

/**
 * What every provider shares: validation, tracking what it holds so close() releases it, withLock,
 * and its locks' turn on the shared acquire loop (src/grant-loop.ts: waitMs, signals, outages,
 * born-lost grants). An adapter implements `request` and `inspect` only.
 *
 * `request` contract: resolve with the grant, or with null when `wait` is false and the key is busy.
 * `cancel` is the request's one signal (the caller's, waitMs, close): race every backend call
 * against it and against callTimeoutMs. When it aborts, remove the queue entry (and release a grant
 * that raced in), then reject. When the backend cannot be reached, reject with
 * BackendUnavailableError: a waiting acquire is retried here, within waitMs.
 *
 * Two rules hold here for every backend: a grant whose lock is already lost is never handed out
 * (it is released and the wait goes on), and close() is bounded by callTimeoutMs + 1 s.
 */
export abstract class BaseLockProvider implements LockProvider {
  abstract readonly backend: BackendName;
  /**
   * Whether a name with a reserved segment (see validateKey) can reach a semaphore's nodes here
   * (ZooKeeper): then forceRelease() and inspect() refuse such names as acquire() does.
   */
  protected readonly reservedNamesCollide: boolean = false;
  /**
   * Whether the adapter keeps lock-delay (LockRequest.lockDelayMs). A provider without it refuses
   * a delay above 0 with NotImplementedError rather than grant without one.
   */
  protected readonly lockDelaySupported: boolean = false;
  protected readonly ttlMs: number;
  /** The provider's options gave ttlMs (rather than the built-in default). */
  readonly #ttlGiven: boolean;
  /** The 'ttl-ignored' notice was given (once per provider). */
  #ttlNoticed = false;
  protected readonly waitMs: number;
  protected readonly driftRate: number;
  protected readonly callTimeoutMs: number;
  /** Granted and not yet released, lost or not: close() releases them all (guarded). */
  readonly #held = new Set<OwnedLock>();
  /** Requests under way: each promise settles once its request has cleaned up after itself. */
  readonly #pending = new Set<Promise<unknown>>();
  /** Aborted by close(): every request's signal derives from it (or is it). */
  readonly #closeController = unlimitedListeners(new AbortController());
  #closing: Promise<void> | undefined;
  /** The backend has answered at least once: from then on, locks ride outages through (retried). */
  #reached = false;
  /** What this provider lends its locks' acquire loop: the semaphores' context, made once. */
  #grantContextInstance: GrantContext | undefined;
  /**
   * For backends where a session or connection, not ttlMs, decides how long a dead holder's lock
   * stays held (ZooKeeper, PostgreSQL): what governs instead, when it differs from `ttlMs`.
   * undefined (the default): ttlMs is honoured per lock.
   */
  protected ttlGovernedElsewhere(_ttlMs: number): Omit<TtlIgnored, 'backend' | 'ttlMs'> | undefined {
    return undefined;
  }

  /**
   * Tells once per provider that a given ttlMs is not honoured: a warning through the `logger`
   * option (else the process's warning channel) and a 'ttl-ignored' event. Called after a grant, so
   * that a session backend reports the session it actually has.
   */
  #noteTtl(ttlMs: number): void {
    if (this.#ttlNoticed) return;
    const governing = this.ttlGovernedElsewhere(ttlMs);
    if (!governing) return;
    this.#ttlNoticed = true;
    const notice: TtlIgnored = { backend: this.backend, ttlMs, ...governing };
    const line =
      `fencekit: ttlMs (${ttlMs} ms) is not used by the ${this.backend} backend: a dead holder's lock ` +
      `stays held up to ${notice.boundMs} ms, as ${notice.governedBy} sets (said once per provider)`;
    if (this.#telemetryOptions.logger)
      this.telemetry.log.write('warn', { event: 'ttl-ignored', ...notice }, line);
    else process.emitWarning(line, { type: 'FencekitWarning', code: 'FENCEKIT_TTL_IGNORED' });
    this.events.emit('ttl-ignored', notice);
  }

  /** Operator events: adapters and the base emit through `this.events`. */
  protected readonly events = new ProviderEvents();
  /** Options for the telemetry, made on first use (the subclass's `backend` is not set yet here). */
  readonly #telemetryOptions: TelemetryOptions;
  #telemetryInstance: ProviderTelemetry | undefined;

  constructor(defaults: ProviderDefaults = {}, callTimeoutDefaultMs = DEFAULT_CALL_TIMEOUT_MS) {
    // First: a client made from these options may fail with an error that quotes a credential.
    processSecrets.add(secretsIn(defaults));
    this.ttlMs = defaults.ttlMs === undefined ? 15_000 : validateTtlMs(defaults.ttlMs, 'defaults.ttlMs');
    this.#ttlGiven = defaults.ttlMs !== undefined;
    this.waitMs = defaults.waitMs === undefined ? Number.POSITIVE_INFINITY : validateWaitMs(defaults.waitMs);
    this.driftRate = defaults.driftRate ?? DEFAULT_DRIFT_RATE;
    if (!(this.driftRate >= 0 && this.driftRate <= 0.5)) {
      throw new RangeError(`driftRate must be within 0..0.5, got ${defaults.driftRate}`);
    }
    this.callTimeoutMs = validateCallTimeoutMs(defaults.callTimeoutMs ?? callTimeoutDefaultMs);
    // The whole options object (credentials to mask in logs); the global MeterProvider as of now.
    this.#telemetryOptions = {
      ...defaults,
      meterProvider: defaults.meterProvider ?? metrics.getMeterProvider(),
    };
  }

  /** Metrics, events and log lines of this provider. */
  protected get telemetry(): ProviderTelemetry {
    this.#telemetryInstance ??= new ProviderTelemetry(this.backend, this.events, this.#telemetryOptions);
    return this.#telemetryInstance;
  }

  /**
   * For session backends (etcd, ZooKeeper): each heartbeat of the session that carries every lock.
   * Counted once; a failed one is announced (renew-failed) for each lock the session carries.
   */
  protected readonly reportSessionRenewal: SessionRenewalListener = (outcome, seconds, error) =>
    this.telemetry.sessionRenewal(outcome, seconds, error, this.#held);

  /** reportSessionRenewal for one of several sessions (etcd's per TTL): announced for its locks only. */
  protected sessionRenewalOf(carries: (lock: OwnedLock) => boolean): SessionRenewalListener {
    return (outcome, seconds, error) =>
      this.telemetry.sessionRenewal(outcome, seconds, error, [...this.#held].filter(carries));
  }

  /**
   * How runSingleton finds a provider's telemetry: an arrow function, so that it works through a
   * Proxy of the provider too (a getter would run with the proxy as `this`, without private fields).
   */
  readonly [TELEMETRY] = (): ProviderTelemetry => this.telemetry;

  protected abstract request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null>;
  protected abstract shutdown(): Promise<void>;
  abstract inspect(key: string): Promise<LockInfo | null>;
  /**
   * Removes the grant that holds `key` now, or only the one with token `expected` when given, in a
   * way that never removes a grant made after the one it read (compare-and-delete on the backend's
   * identity of the grant: create revision, node path, ownerToken, backend pid under a row lock).
   * Resolves with what it removed, or null when no such grant held the key.
   */
  protected abstract removeGrant(key: string, expected: bigint | undefined): Promise<HolderInfo | null>;
  /** Names held now (possibly a superset under prefix: the base filters and sorts). */
  protected abstract heldNames(prefix: string): Promise<Iterable<string>>;

  on<E extends ProviderEventName>(event: E, listener: ProviderEventListener<E>): void {
    this.events.on(event, listener);
  }

  off<E extends ProviderEventName>(event: E, listener: ProviderEventListener<E>): void {
    this.events.off(event, listener);
  }

  /**
   * An operator's tool: removes the current grant of `key` whoever holds it, with a reason that is
   * recorded (the 'force-release' event and a log line). The holder's signal aborts where the
   * backend tells it (see docs/operations.md, "Administration"); the next waiter is granted.
   */
  async forceRelease(key: string, options: ForceReleaseOptions): Promise<HolderInfo | null> {
    validateKey(key, 'key', { allowReserved: !this.reservedNamesCollide });
    const request = validateForceReleaseOptions(options);
    this.assertOpen();
    let removed: HolderInfo | null;
    try {
      removed = await this.removeGrant(key, request.fencingToken);
    } catch (error) {
      // A refusal (InvalidArgumentError) removed nothing; any other failure may have been applied
      // all the same: record the attempt, so an operator who retries knows the first one may have
      // removed the holder (pass fencingToken to retry safely).
      if (error instanceof InvalidArgumentError) throw error;
      this.audit(forceReleaseUnknownLine(this.backend, key, request, error), {
        event: 'force-release-unknown',
        key,
        reason: request.reason,
        by: request.by,
      });
      throw error;
    }
    if (removed === null) return null;
    this.audit(forceReleaseLine(this.backend, key, removed, request), {
      event: 'force-release',
      key,
      fencingToken: removed.fencingToken,
      reason: request.reason,
      by: request.by,
    });
    // Owner, reason and by are callers' text: masked as in every other event.
    const redactor = this.telemetry.redactor;
    this.events.emit('force-release', {
      backend: this.backend,
      key: redactor.text(key),
      owner: removed.owner === undefined ? undefined : redactor.text(removed.owner),
      fencingToken: removed.fencingToken,
      reason: redactor.text(request.reason),
      by: redactor.text(request.by),
    });
    return removed;
  }

  /** Held names under `prefix` ('' for all), sorted. */
  async list(prefix?: string): Promise<string[]> {
    const under = validateListPrefix(prefix);
    this.assertOpen();
    return heldNamesUnder(under, await this.heldNames(under));
  }

  /**
   * The requests waiting for `key`, in the order they will be granted, as far as the backend
   * records them: the first `limit` (default 100). An adapter offers it by overriding queuedWaiters.
   */
  async queue(key: string, options?: QueueOptions): Promise<QueuedWaiter[]> {
    validateKey(key, 'key', { allowReserved: !this.reservedNamesCollide });
    const limit = validateQueueOptions(options);
    this.assertOpen();
    return this.queuedWaiters(key, limit);
  }

  /**
   * queue()'s backend part: at most `limit` entries of `key`'s queue, first in line first, each
   * backend call within callTimeoutMs. By default none (NotImplementedError).
   */
  protected queuedWaiters(_key: string, _limit: number): Promise<QueuedWaiter[]> {
    return Promise.reject(new NotImplementedError(`queue() on the ${this.backend} provider`));
  }

  /**
   * Where operator actions are recorded: the `logger` option's warn (credentials masked) when there
   * is one, else the process's warning channel (type 'FencekitAudit').
   */
  protected audit(line: string, fields: Record<string, unknown>): void {
    if (this.#telemetryOptions.logger) this.telemetry.log.write('warn', fields, line);
    else
      process.emitWarning(this.telemetry.redactor.text(line), {
        type: 'FencekitAudit',
        code: 'FENCEKIT_FORCE_RELEASE',
      });
  }

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** The provider's close signal: adapters derive long-lived work (sessions, watches) from it. */
  protected get closeSignal(): AbortSignal {
    return this.#closeController.signal;
  }

  /**
   * Work that close() must wait for (bounded like the rest of its clean-up): a semaphore's pending
   * request, a permit's release. Locks are tracked by the base itself.
   */
  protected trackWork(work: Promise<unknown>): void {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.#pending.add(settled);
    void settled.then(() => this.#pending.delete(settled));
  }

  /** What this provider lends its semaphores: its defaults, its close signal, and close()'s wait. */
  protected semaphoreContext(): SemaphoreContext {
    return {
      backend: this.backend,
      ttlMs: this.ttlMs,
      ttlGiven: this.#ttlGiven,
      noteTtl: (ttlMs) => this.#noteTtl(ttlMs),
      waitMs: this.waitMs,
      callTimeoutMs: this.callTimeoutMs,
      closeSignal: this.closeSignal,
      track: (work) => this.trackWork(work),
      telemetry: this.telemetry,
    };
  }

  get #grantContext(): GrantContext {
    this.#grantContextInstance ??= this.semaphoreContext();
    return this.#grantContextInstance;
  }

  /**
   * Readers share, a writer excludes everyone, in request order, under `name` (src/read-write/).
   * An adapter offers it by overriding readWriteAdapter.
   */
  readWriteLock(name: string): ReadWriteLock {
    validateKey(name, 'name');
    this.assertOpen();
    return new GenericReadWriteLock(name, this.semaphoreContext(), this.readWriteAdapter(name));
  }

  /** The backend part of readWriteLock(name); by default none (NotImplementedError). */
  protected readWriteAdapter(_name: string): ReadWriteAdapter {
    throw new NotImplementedError(`read-write locks on the ${this.backend} provider`);
  }

  /** Adapters call this once the backend has answered (connected): outages after it are retried. */
  protected noteReached(): void {
    this.#reached = true;
  }

  /**
   * Whether the backend is reachable as far as the adapter knows (connected, session alive): a
   * wait that runs out while it is not ends with BackendUnavailableError instead of a timeout.
   * Adapters that know their connection state override it; by default only a failed last attempt
   * counts as an outage (a request still waiting in the backend's queue has reached it).
   */
  protected backendReachable(): boolean {
    return true;
  }

  async acquire(key: string, opts?: AcquireOptions): Promise<Lock> {
    const lock = await this.#observed(key, opts, true);
    if (lock === null) throw new LockTimeoutError(key, 0);
    return lock;
  }

  /** acquire() that stores `payload` with the grant: how native elections campaign with a value. */
  protected async acquireWithPayload(
    key: string,
    payload: string,
    opts?: AcquireOptions,
  ): Promise<OwnedLock> {
    const lock = await this.#observed(key, opts, true, payload);
    if (lock === null) throw new LockTimeoutError(key, 0);
    return lock;
  }

  tryAcquire(key: string, opts?: Omit<AcquireOptions, 'waitMs'>): Promise<Lock | null> {
    return this.#observed(key, opts, false);
  }

  async withLock<T>(key: string, fn: (lock: Lock) => Promise<T>, opts?: AcquireOptions): Promise<T> {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError(
        'fn',
        `withLock needs the function to run under the lock, got ${typeof fn}`,
      );
    }
    const lock = await this.acquire(key, opts);
    try {
      return await fn(lock);
    } finally {
      // A failed release leaves a grant that its lease (or session) ends; fn's outcome matters more.
      await lock.release().catch(() => undefined);
    }
  }

  /**
   * Fails waiters, aborts every signal and releases what it holds (lost or not: a lock that could
   * not be confirmed may still be ours on the server), then shuts the connections. Bounded: the
   * clean-up and the shutdown share callTimeoutMs, and the shutdown gets 1 s more; what is not done
   * by then is left to leases.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closeController.abort(new ProviderClosedError(this.backend));
      const cleanUp = Promise.allSettled([
        // Let cancelled requests take their queue entries back before the connections go.
        ...this.#pending,
        ...[...this.#held].map((lock) => lock.release()),
      ]);
      const started = performance.now();
      await withinGrace(cleanUp, this.callTimeoutMs);
      // Shutdown may also do what releases left to it (a lease's revoke, closeSession): it gets
      // what the clean-up left of callTimeoutMs, and SHUTDOWN_GRACE_MS more.
      const left = this.callTimeoutMs - (performance.now() - started);
      await withinGrace(this.shutdown(), Math.max(0, left) + SHUTDOWN_GRACE_MS);
    })();
    return this.#closing;
  }

  protected assertOpen(): void {
    if (this.closed) throw new ProviderClosedError(this.backend);
  }

  /**
   * An acquire of a lock on the shared acquire loop (src/grant-loop.ts), timed from before its
   * validation so that a refused acquire is counted too.
   */
  #observed(
    key: string,
    opts: AcquireOptions | undefined,
    wait: boolean,
    payload?: string,
  ): Promise<OwnedLock | null> {
    const waiting = wait && (opts?.waitMs ?? this.waitMs) !== 0;
    return observeWait(this.#grantContext, 'lock', key, waiting, () =>
      this.#obtain(key, opts, wait, payload),
    );
  }

  async #obtain(
    key: string,
    opts: AcquireOptions | undefined,
    wait: boolean,
    payload?: string,
  ): Promise<OwnedLock | null> {
    validateKey(key);
    const options = validateAcquireOptions(opts, {
      ttlMs: this.ttlMs,
      waitMs: this.waitMs,
      ttlGiven: this.#ttlGiven,
    });
    refuseUnkeptLockDelay(options.lockDelayMs, this.lockDelaySupported, `the ${this.backend} provider`);
    this.assertOpen();
    const request: LockRequest = {
      key,
      ...grantTerms(options),
      ...(payload === undefined ? {} : { payload }),
    };
    return obtainGrant(this.#grantContext, {
      name: key,
      what: `acquire("${key}")`,
      kind: 'lock',
      options,
      wait,
      attempt: (shouldWait, cancel) => this.request({ ...request, wait: shouldWait }, cancel),
      // A provider's locks keep their own flag: its adapter notes the backend reached on connecting.
      reached: () => this.#reached,
      answered: () => this.noteReached(),
      reachable: () => this.backendReachable(),
      keep: (lock) => this.#track(lock),
      passesClosedOn: true,
      timedByCaller: true,
    });
  }

  // Its own method so the listener's closure keeps only the lock, not the request's state (signals,
  // options): a provider may hold many thousands of locks.
  #track(lock: OwnedLock): void {
    this.#held.add(lock);
    lock.onRelease(() => this.#held.delete(lock));
  }
}

function validateCallTimeoutMs(ms: unknown): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 1 || ms > 600_000) {
    throw new InvalidArgumentError('callTimeoutMs', `expected 1..600000 ms, got ${String(ms)}`);
  }
  return ms;
}
