import { randomUUID } from 'node:crypto';
import { jitteredDelays, sleepUnlessWoken } from '../backoff.js';
import { withinGrace } from '../cancel-grace.js';
import { DEFAULT_DRIFT_RATE } from '../clock.js';
import { callWithin } from '../deadline.js';
import {
  AbortError,
  BackendUnavailableError,
  ProviderClosedError,
  StaleFencingTokenError,
} from '../errors.js';
import { linkSignals } from '../signals.js';
import { jsonCodec, type ResultCodec } from './codec.js';
import { CallDeadlines } from './deadline.js';
import { FinalError, IdempotencyInFlightError, IdempotencyMismatchError } from './errors.js';
import { type Canonicalize, canonicalJson, payloadHash } from './hash.js';
import { LeaseKeeper } from './lease-keeper.js';
import type { StoredOutcome } from './outcome.js';
import type { BeginRequest, BeginResult, RecordBackend } from './records.js';
import {
  type RunOptions,
  type ValidRunOptions,
  validateIdempotencyKey,
  validateRunOptions,
} from './validate.js';

/** Starts answered after their lease ran out, in a row, before a run gives up as unavailable. */
const MAX_LATE_STARTS = 3;

// Attempt names: one random prefix per process and a counter, unique across processes without
// drawing 16 random bytes per call, which is a visible share of a replay's client time.
const attemptPrefix = randomUUID();
let attempts = 0;
const nextAttempt = () => `${attemptPrefix}:${(attempts++).toString(36)}`;

/** Options of `new IdempotencyStore(records, options)`. */
export interface IdempotencyStoreOptions {
  /** Deadline of every store call (default 5000 ms). */
  callTimeoutMs?: number;
  /** The payload's canonical form, hashed with SHA-256 (default: JSON with sorted keys). */
  canonicalize?: Canonicalize;
  /** How results are stored (default JSON). */
  codec?: ResultCodec;
  /** Defaults for every run: leaseMs (30 s), retentionMs (24 h), waitMs (0). */
  defaults?: Omit<RunOptions, 'signal'>;
}

/** What `store.run(key, payload, fn)` passes to fn. */
export interface RunContext {
  /** Aborts when the lease is lost or cannot be confirmed, or the caller's signal aborts. */
  signal: AbortSignal;
  /** Rises with each run of this key that took the record over; pass it to storage that checks tokens. */
  fencingToken: bigint;
}

/** What `store.run` resolves with: fn's value, or the stored one of an earlier run. */
export interface Execution<T> {
  /** fn's result. */
  value: T;
  /** True when the value is the stored result of an earlier run. */
  replayed: boolean;
}

/** The lease behind a running fn's context, for leaveToLease(): a key only this module holds. */
const leaseOfContext = Symbol('lease');

/**
 * The context fn is given, with its lease under a module symbol (not enumerable) rather than in a
 * WeakMap entry made and swept per run.
 */
interface LeasedContext extends RunContext {
  readonly [leaseOfContext]: LeaseKeeper;
}

/**
 * Stops renewing the lease of the run `context` was given to, without ending the run: its outcome
 * is still stored if fn returns within the lease; after it, the context's signal aborts and a
 * repeat takes the record over (a higher fencingToken), as after a crash. For callers that can no
 * longer tell whether fn will ever return (an HTTP response the client walked away from).
 */
export function leaveToLease(context: RunContext): void {
  (context as Partial<LeasedContext>)[leaseOfContext]?.stopRenewing();
}

/**
 * Idempotency keys over one record store: the first run of a key runs fn and stores its result;
 * repeats get that result. The in-flight record is a lease with a fencing token, so a crashed or
 * paused first run is taken over, and its late completion is refused.
 */
export class IdempotencyStore {
  readonly #callTimeoutMs: number;
  readonly #canonicalize: Canonicalize;
  readonly #codec: ResultCodec;
  readonly #defaults: Omit<RunOptions, 'signal'>;
  /** Aborted when close() begins: new runs are refused, starts and waits end. */
  readonly #closing = new AbortController();
  /** Aborted when close() stops waiting for runs still in fn: their leases and store calls end. */
  readonly #ending = new AbortController();
  /** Aborted when close() stops waiting for completions: their store calls end. */
  readonly #finishing = new AbortController();
  #closed: Promise<void> | undefined;
  /**
   * Runs whose fn has started, until their outcome is stored or refused: close() waits for them.
   */
  readonly #underWay = new Set<Promise<unknown>>();
  readonly #deadlines: CallDeadlines;
  /** The store's own signals, in the shape of a link: what a call without a caller's signal uses. */
  readonly #unlinked: { signal: AbortSignal; dispose(): void };
  readonly #unlinkedRun: { signal: AbortSignal; dispose(): void };
  #validDefaults: ValidRunOptions | undefined;
  readonly #records: RecordBackend;

  constructor(records: RecordBackend, options: IdempotencyStoreOptions = {}) {
    this.#records = records;
    this.#callTimeoutMs = options.callTimeoutMs ?? 5_000;
    this.#canonicalize = options.canonicalize ?? canonicalJson;
    this.#codec = options.codec ?? jsonCodec;
    this.#defaults = options.defaults ?? {};
    this.#deadlines = new CallDeadlines(
      this.#callTimeoutMs,
      this.#closing.signal,
      this.#ending.signal,
      this.#finishing.signal,
    );
    this.#unlinked = { signal: this.#closing.signal, dispose: () => undefined };
    this.#unlinkedRun = { signal: this.#ending.signal, dispose: () => undefined };
  }

  get backend(): RecordBackend['name'] {
    return this.#records.name;
  }

  /** The SHA-256 (hex) a payload is recorded under. */
  hash(payload: unknown): string {
    return payloadHash(payload, this.#canonicalize);
  }

  run<T>(
    key: string,
    payload: unknown,
    fn: (ctx: RunContext) => T | Promise<T>,
    options?: RunOptions,
  ): Promise<T> {
    // Not an async wrapper: one promise less per call.
    return this.execute(key, payload, fn, options).then(executionValue);
  }

  /** As run(), and says whether the value was replayed. */
  async execute<T>(
    key: string,
    payload: unknown,
    fn: (ctx: RunContext) => T | Promise<T>,
    options?: RunOptions,
  ): Promise<Execution<T>> {
    validateIdempotencyKey(key);
    const opts = this.#runOptions(options);
    const hash = this.hash(payload);
    if (typeof fn !== 'function') throw new TypeError('fn must be a function');
    if (this.#closing.signal.aborted) throw new ProviderClosedError(`idempotency (${this.#records.name})`);
    // Without a caller's signal the store's own is enough (no derived signal to make and undo).
    const linked = opts.signal ? linkSignals([opts.signal, this.#closing.signal]) : this.#unlinked;
    try {
      const { leaseMs, retentionMs } = opts;
      // The attempt names this call's start, so that a begin retried after a lost reply adopts its
      // own record.
      const request: BeginRequest = { key, hash, leaseMs, retentionMs, attempt: nextAttempt() };
      const wait = new WaitWithin(performance.now() + opts.waitMs, linked.signal);
      let lateStarts = 0;
      for (;;) {
        const beganAt = performance.now();
        const begun = await this.#begin(request, wait);
        switch (begun.state) {
          case 'completed':
            return { value: this.#replay(begun.outcome) as T, replayed: true };
          case 'mismatch':
            throw new IdempotencyMismatchError(key);
          case 'started':
            if (performance.now() >= beganAt + leaseMs * (1 - DEFAULT_DRIFT_RATE)) {
              // The answer came after the lease may have run out: another request may be taking
              // the record over. Never run fn on it; ask again (adopting our own start afresh).
              if (++lateStarts < MAX_LATE_STARTS) continue;
              throw await this.#lateStartsError(key, begun.token, leaseMs);
            }
            return { value: await this.#runUnderWay(key, begun.token, beganAt, fn, opts), replayed: false };
          case 'in-flight':
            if (!wait.timeLeft()) throw new IdempotencyInFlightError(key, begun.retryAfterMs);
            await wait.pause('waiting for an in-flight idempotent request', begun.retryAfterMs);
        }
      }
    } finally {
      linked.dispose();
    }
  }

  /** The begin call; within waitMs an outage is ridden through (fn has not run: asking again is safe). */
  async #begin(request: BeginRequest, wait: WaitWithin): Promise<BeginResult> {
    for (;;) {
      try {
        return await this.#call('idempotency begin', wait.signal, () => this.#records.begin(request));
      } catch (error) {
        if (!(error instanceof BackendUnavailableError) || !wait.timeLeft()) throw error;
        await wait.pause('waiting for the idempotency store');
      }
    }
  }

  /** Starts answered too late MAX_LATE_STARTS times: the record is given back, the call fails. */
  async #lateStartsError(key: string, token: bigint, leaseMs: number): Promise<BackendUnavailableError> {
    await this.#call('idempotency abandon', undefined, () => this.#records.abandon(key, token)).catch(
      () => undefined, // the lease ends by itself
    );
    return new BackendUnavailableError(
      `idempotency begin: the store answered later than the lease (${leaseMs} ms) ${MAX_LATE_STARTS} times`,
    );
  }

  /** Most runs take the store's defaults: those are validated once. */
  #runOptions(options: RunOptions | undefined): ValidRunOptions {
    if (options !== undefined) return validateRunOptions(options, this.#defaults);
    this.#validDefaults ??= validateRunOptions(undefined, this.#defaults);
    return this.#validDefaults;
  }

  /** runFirst, counted as under way so that close() lets it store its outcome. */
  async #runUnderWay<T>(
    key: string,
    token: bigint,
    beganAt: number,
    fn: (ctx: RunContext) => T | Promise<T>,
    opts: ValidRunOptions,
  ): Promise<T> {
    if (this.#closing.signal.aborted) {
      // Started as close() began: fn is not run, and the key is freed for a retry.
      await this.#call('idempotency abandon', undefined, () => this.#records.abandon(key, token)).catch(
        () => undefined, // the lease ends by itself
      );
      throw this.#closing.signal.reason;
    }
    // The run outlives the start of close(): only the caller's signal and the end of close's wait
    // stop it.
    const link = opts.signal ? linkSignals([opts.signal, this.#ending.signal]) : this.#unlinkedRun;
    const run = this.#runFirst(key, token, beganAt, fn, opts, link.signal);
    this.#underWay.add(run);
    try {
      return await run;
    } finally {
      this.#underWay.delete(run);
      link.dispose();
    }
  }

  async #runFirst<T>(
    key: string,
    token: bigint,
    beganAt: number,
    fn: (ctx: RunContext) => T | Promise<T>,
    opts: ValidRunOptions,
    signal: AbortSignal,
  ): Promise<T> {
    const lease = new LeaseKeeper(key, token, opts.leaseMs, beganAt, signal, () =>
      this.#call('idempotency renew', signal, () => this.#records.renew(key, token, opts.leaseMs)),
    );
    let outcome: StoredOutcome;
    let value: T | undefined;
    let final: FinalError | undefined;
    try {
      // The signal is a getter: a run that never reads it never has one made.
      const context: RunContext = {
        get signal() {
          return lease.signal;
        },
        fencingToken: token,
      };
      // Not enumerable: not copied by a spread, printed or compared as the caller's data.
      Object.defineProperty(context, leaseOfContext, { value: lease });
      value = await fn(context);
      outcome = { kind: 'value', body: this.#codec.encode(value) };
    } catch (error) {
      lease.stop();
      if (!(error instanceof FinalError)) {
        // Retryable: free the key now. If this fails the lease still ends by itself after leaseMs.
        await this.#call('idempotency abandon', undefined, () => this.#records.abandon(key, token)).catch(
          () => undefined,
        );
        throw error;
      }
      final = error;
      outcome = {
        kind: 'final-error',
        body: JSON.stringify({ message: error.message, status: error.status, details: error.details }),
      };
    }
    try {
      // fn has returned: its effect happened, so its outcome is stored while the lease is trusted,
      // even after close() stopped waiting for runs in fn (close() waits for completions). Past the
      // lease, the run counts as crashed, as it was told through its signal: nothing more is sent.
      if (this.#ending.signal.aborted && performance.now() >= lease.trustedUntil)
        throw this.#ending.signal.reason;
      await this.#completeWithinLease(key, token, outcome, opts.retentionMs, lease);
    } finally {
      lease.stop();
    }
    if (final) throw final;
    return value as T;
  }

  /** The fenced completion, retried while the lease may still be ours; a takeover refuses it. */
  async #completeWithinLease(
    key: string,
    token: bigint,
    outcome: StoredOutcome,
    retentionMs: number,
    lease: LeaseKeeper,
  ): Promise<void> {
    let delays: Generator<number, never> | undefined;
    for (;;) {
      try {
        // Under its own signal: close() ending the runs still in fn does not cut a completion off.
        const done = await this.#call('idempotency complete', this.#finishing.signal, () =>
          this.#records.complete({ key, token, outcome, retentionMs }),
        );
        if (done.stored) return;
        throw new StaleFencingTokenError(`idempotency key "${key}"`, token, done.current ?? token);
      } catch (error) {
        // close() stopped waiting for completions: the outcome is not stored, the lease runs out.
        if (error instanceof AbortError && this.#finishing.signal.aborted)
          throw this.#finishing.signal.reason;
        const left = lease.trustedUntil - performance.now();
        if (!(error instanceof BackendUnavailableError) || left <= 0) throw error;
        delays ??= jitteredDelays({ initialMs: 20, maxMs: 500 });
        const pause = Math.min(delays.next().value, left);
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  }

  #replay(outcome: StoredOutcome): unknown {
    if (outcome.kind === 'value') return this.#codec.decode(outcome.body);
    const stored = JSON.parse(outcome.body) as { message: string; status?: number; details?: unknown };
    throw new FinalError(stored.message, { status: stored.status, details: stored.details, replayed: true });
  }

  /**
   * A call without a signal of its own belongs to a run under way: it lasts until close() ends runs.
   * `what` is a whole constant ('idempotency begin'), not built per call.
   */
  #call<R>(what: string, signal: AbortSignal | undefined, fn: () => Promise<R>): Promise<R> {
    return this.#deadlines.run(what, signal ?? this.#ending.signal, fn);
  }

  /**
   * Refuses new runs at once (ProviderClosedError) and ends starts and waits. Runs whose fn is under
   * way keep their lease and may store their outcome; close() waits callTimeoutMs for them. Then a
   * run still in fn is treated as a crashed one: its lease ends, its outcome is not stored (it
   * rejects with ProviderClosedError), and once its lease runs out a retry runs fn again. A run
   * whose fn has returned (also one returning after that first wait, while its lease is trusted)
   * is not cut off, since its effect has happened: its completion gets callTimeoutMs more to be
   * stored (within its lease, which is no longer renewed).
   * Last, the store's connections are closed (bounded by callTimeoutMs again).
   */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      const reason = new ProviderClosedError(`idempotency (${this.#records.name})`);
      this.#closing.abort(reason);
      this.#deadlines.failUnder(this.#closing.signal, reason);
      await this.#settleWithin([...this.#underWay]);
      this.#ending.abort(reason);
      this.#deadlines.failUnder(this.#ending.signal, reason);
      // A run whose fn returns now, within its lease, is still stored: runs still in fn are waited
      // for too (their signal has aborted), bounded by callTimeoutMs as the completions are.
      await this.#settleWithin([...this.#underWay]);
      this.#finishing.abort(reason);
      this.#deadlines.failAll(reason);
      await callWithin(() => this.#records.close(), {
        timeoutMs: this.#callTimeoutMs,
        what: 'idempotency close',
      }).catch(
        () => undefined, // a connection the server no longer answers is left to its client's end
      );
    })();
    return this.#closed;
  }

  /** Waits until every run given has settled, or callTimeoutMs has passed. */
  async #settleWithin(runs: Promise<unknown>[]): Promise<void> {
    if (runs.length === 0) return;
    await withinGrace(Promise.allSettled(runs), this.#callTimeoutMs);
  }
}

const executionValue = <T>(execution: Execution<T>): T => execution.value;

/** A wait that lasts until `until` at most, in jittered pauses that `signal` cuts short. */
class WaitWithin {
  /** Made only when a run must be waited for. */
  #delays: Generator<number, never> | undefined;

  constructor(
    readonly until: number,
    readonly signal: AbortSignal,
  ) {}

  timeLeft(): boolean {
    return this.until > performance.now();
  }

  /** One pause: the next delay, no longer than what is left (nor `capMs`); an abort is an AbortError. */
  async pause(what: string, capMs = Number.POSITIVE_INFINITY): Promise<void> {
    this.#delays ??= jitteredDelays({ initialMs: 10, maxMs: 250 });
    const ms = Math.max(0, Math.min(this.#delays.next().value, this.until - performance.now(), capMs));
    await sleepUnlessWoken(ms, this.signal).done.catch((reason: unknown) => {
      throw new AbortError(what, reason);
    });
  }
}
