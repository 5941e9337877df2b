import {
  type Attributes,
  createNoopMeter,
  type Meter,
  type MeterProvider,
  metrics,
  type ObservableResult,
} from '@opentelemetry/api';
import { monotonicNow } from '../clock.js';
import { AbortError, LockTimeoutError, type LossReason, ProviderClosedError } from '../errors.js';
import type { ProviderEvents } from '../events.js';
import type { GrantObserver, OwnedLock, RenewalOutcome } from '../ownership.js';
import { VERSION } from '../version.js';
import { createInstruments, type Instruments } from './instruments.js';
import { type FencekitLogger, SafeLog } from './logger.js';
import { Redactor, secretsIn } from './redact.js';

/** Where a provider reports its metrics and log lines; every built-in provider takes these options. */
export interface TelemetryOptions {
  /** Where the instruments come from. Default: the global MeterProvider when the provider is created. */
  meterProvider?: MeterProvider;
  /** pino or console style; losses, renewal failures, terms and singleton faults are logged. */
  logger?: FencekitLogger;
  /**
   * Adds the lock, semaphore, election or job name as the `name` attribute. Off by default: one
   * series per name can overwhelm a metrics backend when names are per user or per order.
   */
  metricsNameAttribute?: boolean;
}

/** What a grant is: a lock, permits of a semaphore, or a read-write lock's read or write (its name is the event's key). */
export type GrantKind = 'lock' | 'semaphore' | 'read-lock' | 'write-lock';
/** How a wait for a grant ended: the `outcome` attribute of the wait-duration metric. */
export type WaitOutcome = 'granted' | 'timeout' | 'aborted' | 'error';

/** The instrumentation scope: the package's name and version, as OpenTelemetry asks of a library. */
const METER_NAME = 'fencekit';

/**
 * A provider's metrics, events and log lines, in one place so that adapters stay thin: the base
 * provider and the generic semaphore report waits and grants, OwnedLock reports each grant's end
 * and renewals through the GrantObserver attached at grant time.
 */
export class ProviderTelemetry {
  readonly backend: string;
  readonly events: ProviderEvents;
  readonly redactor: Redactor;
  readonly log: SafeLog;
  readonly #instruments: Instruments;
  readonly #withName: boolean;
  /** Attribute sets without a name are few: made once, not per call. */
  readonly #shared = new Map<string, Map<string, Attributes>>();
  /** Grants held now, for the age of the oldest: a hold time seen while it lasts, not only after. */
  readonly #live = new Set<GrantRecord>();

  /** `options` is the provider's whole options object: credentials in it are masked in logs and events. */
  constructor(backend: string, events: ProviderEvents, options: TelemetryOptions = {}) {
    this.backend = backend;
    this.events = events;
    // Taken now, not at import: an app that sets OpenTelemetry up after importing fencekit counts.
    const meterProvider = options.meterProvider ?? metrics.getMeterProvider();
    this.#instruments = createInstruments(meterOf(meterProvider));
    try {
      observeOldest(this.#instruments, new WeakRef(this));
    } catch {
      // no oldest-hold gauge from a meter that refuses callbacks; everything else still counts
    }
    this.#withName = options.metricsNameAttribute === true;
    this.redactor = new Redactor(secretsIn(options));
    this.log = new SafeLog(options.logger, this.redactor);
  }

  attributes(kind: string, name: string, extraName?: string, extraValue?: string): Attributes {
    // A session's renewals have no name: they serve every lock of the provider.
    if (this.#withName && name !== '') {
      // A name is the caller's text: what it shows of a credential is masked as in events.
      const attrs: Attributes = { backend: this.backend, kind, name: this.redactor.text(name) };
      if (extraName !== undefined) attrs[extraName] = extraValue;
      return attrs;
    }
    // Nested maps, not a joined string: this runs several times per acquire.
    let byKind = this.#shared.get(kind);
    if (!byKind) {
      byKind = new Map();
      this.#shared.set(kind, byKind);
    }
    const id = extraName === undefined ? '' : `${extraName}=${extraValue}`;
    let attrs = byKind.get(id);
    if (!attrs) {
      attrs = { backend: this.backend, kind };
      if (extraName !== undefined) attrs[extraName] = extraValue;
      byKind.set(id, attrs);
    }
    return attrs;
  }

  /**
   * An acquire began: returns what ends it. `waiting` acquires count as waiters meanwhile.
   * Outcomes: granted, timeout (also a busy tryAcquire), aborted (signal, close), error.
   */
  waitStarted(kind: GrantKind, name: string, waiting: boolean): (result: unknown) => void {
    const startedAt = monotonicNow();
    const instruments = this.#instruments;
    if (waiting) instruments.waiters.add(1, this.attributes(kind, name));
    return (result) => {
      if (waiting) instruments.waiters.add(-1, this.attributes(kind, name));
      const outcome = waitOutcome(result);
      instruments.waitDuration.record(
        (monotonicNow() - startedAt) / 1000,
        this.attributes(kind, name, 'outcome', outcome),
      );
    };
  }

  /** A grant is handed out: counted, announced, and observed until it ends. */
  granted(lock: OwnedLock, kind: GrantKind, name: string, owner: string | undefined): void {
    const grant = new GrantRecord(this, kind, name, owner, lock);
    this.#instruments.held.add(1, this.attributes(kind, name));
    if (this.events.has('grant')) this.events.emit('grant', grant.facts());
    this.#live.add(grant);
    lock.observe(grant);
  }

  /** @internal GrantRecord's reports. */
  ended(grant: GrantRecord, reason: LossReason, cause: unknown): void {
    const i = this.#instruments;
    const { kind, name } = grant;
    this.#live.delete(grant);
    i.held.add(-1, this.attributes(kind, name));
    i.holdDuration.record(
      (monotonicNow() - grant.since) / 1000,
      this.attributes(kind, name, 'reason', reason),
    );
    i.losses.add(1, this.attributes(kind, name, 'reason', reason));
    if (grant.term) {
      if (reason !== 'released') i.electionFailovers.add(1, this.attributes('election', name));
      this.log.write(
        reason === 'released' ? 'info' : 'warn',
        { backend: this.backend, election: name, term: grant.lock.fencingToken, reason },
        `fencekit: term ${grant.lock.fencingToken} of election "${name}" ended: ${reason}`,
      );
    }
    if (reason === 'released') {
      if (this.events.has('release')) this.events.emit('release', grant.facts());
      return;
    }
    const error = this.redactor.error(cause);
    if (this.events.has('loss')) this.events.emit('loss', { ...grant.facts(), reason });
    this.log.write(
      'warn',
      {
        backend: this.backend,
        key: name,
        owner: grant.owner,
        fencingToken: grant.lock.fencingToken,
        reason,
        ...(cause === undefined ? {} : { error }),
      },
      `fencekit: ${kind} "${name}" (token ${grant.lock.fencingToken}) lost: ${reason}`,
    );
  }

  /** @internal */
  renewal(
    grant: GrantRecord | undefined,
    kind: string,
    name: string,
    outcome: RenewalOutcome,
    seconds: number,
    error?: unknown,
  ): void {
    this.#instruments.renewals.add(1, this.attributes(kind, name, 'outcome', outcome));
    this.#instruments.renewalDuration.record(seconds, this.attributes(kind, name, 'outcome', outcome));
    if (outcome !== 'failed' || !grant) return;
    const safeError = this.redactor.error(error);
    if (this.events.has('renew-failed'))
      this.events.emit('renew-failed', { ...grant.facts(), error: safeError });
    this.log.write(
      'warn',
      { backend: this.backend, key: name, fencingToken: grant.lock.fencingToken, error: safeError },
      `fencekit: renewing ${kind} "${name}" (token ${grant.lock.fencingToken}) failed: ${errorText(safeError)}`,
    );
  }

  /** @internal The oldest live grant's age per attribute set (per kind, or per name when opted in). */
  oldestAges(): Array<{ attributes: Attributes; seconds: number }> {
    const now = monotonicNow();
    const oldest = new Map<string, { attributes: Attributes; seconds: number }>();
    for (const grant of this.#live) {
      const id = this.#withName ? `${grant.kind}\0${grant.name}` : grant.kind;
      const seconds = (now - grant.since) / 1000;
      const seen = oldest.get(id);
      if (!seen) oldest.set(id, { attributes: this.attributes(grant.kind, grant.name), seconds });
      else if (seconds > seen.seconds) seen.seconds = seconds;
    }
    return [...oldest.values()];
  }

  /** @internal A session heartbeat (etcd, ZooKeeper): one renewal for all the locks it carries. */
  sessionRenewal(outcome: RenewalOutcome, seconds: number, error: unknown, held: Iterable<OwnedLock>): void {
    this.renewal(undefined, 'session', '', outcome, seconds);
    if (outcome !== 'failed') return;
    const safeError = this.redactor.error(error);
    this.log.write(
      'warn',
      { backend: this.backend, error: safeError },
      `fencekit: ${this.backend} session heartbeat failed: ${errorText(safeError)}`,
    );
    if (!this.events.has('renew-failed')) return;
    for (const lock of held) {
      const grant = lock.observer;
      if (grant instanceof GrantRecord && lock.held) {
        this.events.emit('renew-failed', { ...grant.facts(), error: safeError });
      }
    }
  }

  /** @internal */
  termBegan(grant: GrantRecord, election: string): void {
    this.#instruments.electionTerms.add(1, this.attributes('election', election));
    this.log.write(
      'info',
      { backend: this.backend, election, term: grant.lock.fencingToken, value: grant.owner },
      `fencekit: leader of election "${election}" (term ${grant.lock.fencingToken})`,
    );
  }

  singletonRan(job: string, tick: Date, error?: unknown): void {
    const outcome = error === undefined ? 'ok' : 'error';
    this.#instruments.singletonRuns.add(1, this.attributes('singleton', job, 'outcome', outcome));
    if (error === undefined) return;
    const safeError = this.redactor.error(error);
    this.log.write(
      'error',
      { backend: this.backend, job, tick: tick.toISOString(), error: safeError },
      `fencekit: singleton "${job}" failed at tick ${tick.toISOString()}: ${errorText(safeError)}`,
    );
  }

  singletonMissed(job: string, tick: Date): void {
    this.#instruments.singletonMissed.add(1, this.attributes('singleton', job));
    this.log.write(
      'warn',
      { backend: this.backend, job, tick: tick.toISOString() },
      `fencekit: no replica ran singleton "${job}" at tick ${tick.toISOString()}`,
    );
  }
}

/** One grant as telemetry sees it: what it is, since when, and whether it is a leader's term. */
class GrantRecord implements GrantObserver {
  readonly since = monotonicNow();
  term = false;

  constructor(
    readonly telemetry: ProviderTelemetry,
    readonly kind: GrantKind,
    readonly name: string,
    readonly owner: string | undefined,
    readonly lock: OwnedLock,
  ) {}

  facts() {
    return {
      backend: this.telemetry.backend as never,
      key: this.telemetry.redactor.text(this.name),
      owner: this.owner === undefined ? undefined : this.telemetry.redactor.text(this.owner),
      fencingToken: this.lock.fencingToken,
    };
  }

  ended(reason: LossReason, cause: unknown): void {
    this.telemetry.ended(this, reason, cause);
  }

  renewed(outcome: RenewalOutcome, seconds: number, error?: unknown): void {
    this.telemetry.renewal(this, this.kind, this.name, outcome, seconds, error);
  }

  becameTerm(election: string): void {
    if (this.term) return;
    this.term = true;
    this.telemetry.termBegan(this, election);
  }
}

/**
 * The gauge's callback holds the telemetry weakly: a provider that is dropped is not kept alive by
 * the (global) MeterProvider, and its callback goes at the next collection.
 */
function observeOldest(instruments: Instruments, telemetry: WeakRef<ProviderTelemetry>): void {
  const callback = (result: ObservableResult): void => {
    const live = telemetry.deref();
    if (!live) {
      instruments.oldestHold.removeCallback(callback);
      return;
    }
    for (const { attributes, seconds } of live.oldestAges()) result.observe(seconds, attributes);
  };
  instruments.oldestHold.addCallback(callback);
}

function waitOutcome(result: unknown): WaitOutcome {
  if (result === null || result instanceof LockTimeoutError) return 'timeout';
  if (result instanceof AbortError || result instanceof ProviderClosedError) return 'aborted';
  if (result instanceof Error) return 'error';
  return 'granted';
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Providers that carry telemetry (every built-in one) expose it under this symbol. */
export const TELEMETRY = Symbol.for('fencekit.telemetry');

const forCustomProviders = new WeakMap<object, ProviderTelemetry>();

/** The provider's telemetry; for a custom provider without any, one on the global MeterProvider. */
export function telemetryOf(provider: { backend: string }, events: () => ProviderEvents): ProviderTelemetry {
  const own = (provider as { [TELEMETRY]?: unknown })[TELEMETRY];
  if (typeof own === 'function') return own() as ProviderTelemetry;
  let telemetry = forCustomProviders.get(provider);
  if (!telemetry) {
    telemetry = new ProviderTelemetry(provider.backend, events());
    forCustomProviders.set(provider, telemetry);
  }
  return telemetry;
}

/** The provider's meter, or a no-op one when the MeterProvider throws (metrics never break locks). */
function meterOf(meterProvider: MeterProvider): Meter {
  try {
    return meterProvider.getMeter(METER_NAME, VERSION);
  } catch {
    return createNoopMeter();
  }
}
