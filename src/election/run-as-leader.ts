import { hostname } from 'node:os';
import { BrokenCircuitError, ConsecutiveBreaker, circuitBreaker, handleAll } from 'cockatiel';
import { jitteredDelays, sleepUnlessWoken } from '../backoff.js';
import { AuthenticationError, InvalidArgumentError } from '../errors.js';
import { linkSignals } from '../signals.js';
import type { LockProvider } from '../types.js';
import { createElection, type LockElectionOptions } from './lock-election.js';
import type { Election, LeaderInfo } from './types.js';

/** What `runAsLeader`'s function receives for one term. */
export interface LeaderWork {
  /** Aborted when the term ends (lost, resigned, stopped): stop working. */
  signal: AbortSignal;
  /** The fencing token of this term: pass it to the storage with every write. */
  term: bigint;
}

/** Options of {@link runAsLeader}. */
export interface RunAsLeaderOptions extends LockElectionOptions {
  /** This candidate's identity, shown to observers. Default `<hostname>/<pid>`. */
  value?: string;
  /** Stops the loop: the current term is resigned so a successor takes over at once. */
  signal?: AbortSignal;
  /** Also stop (and resign) on SIGTERM and SIGINT. Default false. */
  handleSignals?: boolean;
  /**
   * How long one campaign may wait before it counts as a failure (onError, backoff, breaker).
   * Default: without limit — a campaign rides through backend outages and waits its turn.
   */
  campaignWaitMs?: number;
  /** Pause between a term's end or a failure and the next campaign (decorrelated jitter). */
  backoff?: { initialMs?: number; maxMs?: number };
  /** After this many failed campaigns in a row, wait halfOpenAfterMs before trying again. */
  breaker?: { failures?: number; halfOpenAfterMs?: number };
  onElected?: (term: bigint) => void;
  onDemoted?: (term: bigint) => void;
  /** Every change of leader seen by this candidate, including null (no leader). */
  onLeaderChange?: (leader: LeaderInfo | null) => void;
  /** Campaign failures (backend unavailable …) and errors thrown by fn; the loop goes on (not after AUTH_FAILED). */
  onError?: (error: unknown) => void;
}

/**
 * Runs fn whenever this process leads `name`, until stopped: campaign → fn({ signal, term }) →
 * when the term ends (lost, fn returned or threw) abort its signal, resign, wait a jittered
 * backoff, campaign again. Backend errors are retried with backoff behind a circuit breaker;
 * every wait ends early when the caller stops. Resolves once stopped and resigned; rejects with
 * the {@link AuthenticationError} (`AUTH_FAILED`) of a campaign the backend refused, which no
 * retry would change.
 */
export async function runAsLeader(
  provider: LockProvider,
  name: string,
  fn: (work: LeaderWork) => Promise<void>,
  options: RunAsLeaderOptions = {},
): Promise<void> {
  const initialMs = options.backoff?.initialMs ?? 100;
  const maxMs = options.backoff?.maxMs ?? 10_000;
  const failures = options.breaker?.failures ?? 5;
  const halfOpenAfter = options.breaker?.halfOpenAfterMs ?? 10_000;
  if (!(initialMs > 0 && maxMs >= initialMs))
    throw new InvalidArgumentError('backoff', 'needs 0 < initialMs <= maxMs');
  if (!(Number.isInteger(failures) && failures > 0))
    throw new InvalidArgumentError('breaker.failures', 'a positive integer');

  if (options.signal?.aborted) return;
  // One stop signal for the loop: the caller's, and SIGTERM/SIGINT when asked.
  const osStop = new AbortController();
  const stop = linkSignals([options.signal, osStop.signal]);
  const onOsSignal = () => osStop.abort(new Error('stopped by a process signal'));
  const osSignals: NodeJS.Signals[] = options.handleSignals ? ['SIGTERM', 'SIGINT'] : [];
  for (const s of osSignals) process.on(s, onOsSignal);

  const election = createElection(provider, name, options);
  const value = options.value ?? `${hostname()}/${process.pid}`;
  const breaker = circuitBreaker(handleAll, { halfOpenAfter, breaker: new ConsecutiveBreaker(failures) });
  const watching = watchLeader(election, stop.signal, options, { initialMs, maxMs });
  const delays = jitteredDelays({ initialMs, maxMs });
  const pause = async () => {
    await sleepUnlessWoken(delays.next().value, stop.signal).done.catch(() => undefined);
  };

  try {
    while (!stop.signal.aborted) {
      let leadership: Awaited<ReturnType<typeof election.campaign>>;
      try {
        leadership = await breaker.execute(() =>
          election.campaign(value, {
            signal: stop.signal,
            ...(options.campaignWaitMs === undefined ? {} : { waitMs: options.campaignWaitMs }),
          }),
        );
      } catch (error) {
        if (stop.signal.aborted) break;
        // Refused credentials or certificates do not heal by waiting: the caller has to know.
        if (error instanceof AuthenticationError) throw error;
        if (!(error instanceof BrokenCircuitError)) options.onError?.(error);
        await pause(); // never a hot loop: failures and an open circuit both wait
        continue;
      }
      // The term's signal derives from the leadership's and the loop's: a leadership already lost
      // (or a stop already asked) aborts it at once, and such a term runs nothing.
      const term = linkSignals([leadership.signal, stop.signal]);
      const elected = !term.signal.aborted;
      try {
        if (elected) {
          options.onElected?.(leadership.term);
          await fn({ signal: term.signal, term: leadership.term });
        }
      } catch (error) {
        options.onError?.(error);
      } finally {
        term.abort(new Error('the term ended'));
        term.dispose();
        await leadership.resign().catch((error: unknown) => options.onError?.(error));
        if (elected) options.onDemoted?.(leadership.term);
      }
      await pause();
    }
  } finally {
    for (const s of osSignals) process.off(s, onOsSignal);
    osStop.abort();
    stop.dispose();
    await watching;
  }
}

/**
 * Reports every change of leader to onLeaderChange. An observer that fails (a backend blip) is
 * reported to onError and started again after a jittered pause, until stop: observing never ends
 * silently. The same leader is not reported twice across such restarts.
 */
async function watchLeader(
  election: Election,
  stop: AbortSignal,
  options: RunAsLeaderOptions,
  backoff: { initialMs: number; maxMs: number },
): Promise<void> {
  const onChange = options.onLeaderChange;
  if (!onChange) return;
  let delays = jitteredDelays(backoff);
  let last: LeaderInfo | null | undefined;
  while (!stop.aborted) {
    try {
      for await (const leader of election.observe({ signal: stop })) {
        if (stop.aborted) return;
        if (last !== undefined && last?.term === leader?.term && last?.value === leader?.value) continue;
        last = leader;
        onChange(leader);
        delays = jitteredDelays(backoff); // it works again: the next failure starts short
      }
    } catch (error) {
      if (stop.aborted) return;
      options.onError?.(error);
    }
    await sleepUnlessWoken(delays.next().value, stop).done.catch(() => undefined);
  }
}
