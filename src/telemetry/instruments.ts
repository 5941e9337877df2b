import {
  type Counter,
  createNoopMeter,
  type Histogram,
  type Meter,
  type ObservableGauge,
  type UpDownCounter,
} from '@opentelemetry/api';

/** Metric names and units, fixed by the table in docs/operations.md: dashboards depend on them. */
export const METRIC_NAMES = {
  waitDuration: 'fencekit.lock.wait.duration',
  holdDuration: 'fencekit.lock.hold.duration',
  oldestHold: 'fencekit.lock.hold.oldest',
  held: 'fencekit.lock.held',
  waiters: 'fencekit.lock.waiters',
  renewals: 'fencekit.lock.renewals',
  renewalDuration: 'fencekit.lock.renewal.duration',
  losses: 'fencekit.lock.losses',
  electionTerms: 'fencekit.election.terms',
  electionFailovers: 'fencekit.election.failovers',
  singletonRuns: 'fencekit.singleton.runs',
  singletonMissed: 'fencekit.singleton.missed',
} as const;

/** Buckets for waits, holds and renewals: 1 ms to 10 min, in seconds. */
const SECONDS_BUCKETS = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
];

export interface Instruments {
  waitDuration: Histogram;
  holdDuration: Histogram;
  oldestHold: ObservableGauge;
  held: UpDownCounter;
  waiters: UpDownCounter;
  renewals: Counter;
  renewalDuration: Histogram;
  losses: Counter;
  electionTerms: Counter;
  electionFailovers: Counter;
  singletonRuns: Counter;
  singletonMissed: Counter;
}

/**
 * The instruments, made so that they never throw into a grant, a release or a heartbeat: a broken
 * SDK or exporter costs the metrics, never a lock (OpenTelemetry says they must not throw; not
 * every implementation keeps that). A meter that cannot even make them gives no-op instruments.
 */
export function createInstruments(meter: Meter): Instruments {
  try {
    return guarded(makeInstruments(meter));
  } catch {
    return makeInstruments(createNoopMeter());
  }
}

function guarded(instruments: Instruments): Instruments {
  const out = { ...instruments } as Record<string, object>;
  for (const [name, instrument] of Object.entries(out)) {
    if (name === 'oldestHold') continue; // observed by callback, not called from a grant's path
    const safe = Object.create(instrument) as Record<string, unknown>;
    for (const method of ['add', 'record']) {
      const call = (instrument as Record<string, unknown>)[method];
      if (typeof call !== 'function') continue;
      safe[method] = (...args: unknown[]) => {
        try {
          call.apply(instrument, args);
        } catch {
          // the metric point is lost; the caller's grant or release goes on
        }
      };
    }
    out[name] = safe;
  }
  return out as unknown as Instruments;
}

function makeInstruments(meter: Meter): Instruments {
  const seconds = (name: string, description: string) =>
    meter.createHistogram(name, {
      description,
      unit: 's',
      advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
    });
  const counter = (name: string, description: string, unit: string) =>
    meter.createCounter(name, { description, unit });
  const upDown = (name: string, description: string, unit: string) =>
    meter.createUpDownCounter(name, { description, unit });
  return {
    waitDuration: seconds(
      METRIC_NAMES.waitDuration,
      'Time from an acquire call to its outcome (granted, timeout, aborted, error)',
    ),
    holdDuration: seconds(METRIC_NAMES.holdDuration, 'Time from a grant to its end (release or loss)'),
    oldestHold: meter.createObservableGauge(METRIC_NAMES.oldestHold, {
      description: 'Age of the oldest grant this process holds now (the hold time so far)',
      unit: 's',
    }),
    held: upDown(METRIC_NAMES.held, 'Grants this process holds now', '{lock}'),
    waiters: upDown(METRIC_NAMES.waiters, 'Acquire calls of this process waiting now', '{request}'),
    renewals: counter(
      METRIC_NAMES.renewals,
      'Lease or session renewals by outcome (renewed, rejected, failed)',
      '{renewal}',
    ),
    renewalDuration: seconds(METRIC_NAMES.renewalDuration, 'Round trip of a renewal'),
    losses: counter(
      METRIC_NAMES.losses,
      'Grants ended, by reason (released, expired, unconfirmed, session-lost, ...)',
      '{lock}',
    ),
    electionTerms: counter(METRIC_NAMES.electionTerms, 'Terms this process won as leader', '{term}'),
    electionFailovers: counter(
      METRIC_NAMES.electionFailovers,
      'Terms of this process that ended without its resignation (lost leadership)',
      '{term}',
    ),
    singletonRuns: counter(
      METRIC_NAMES.singletonRuns,
      'Singleton job runs on this replica by outcome (ok, error)',
      '{run}',
    ),
    singletonMissed: counter(METRIC_NAMES.singletonMissed, 'Singleton ticks that no replica ran', '{tick}'),
  };
}
