import { hostname } from 'node:os';
import { BrokenCircuitError, ConsecutiveBreaker, circuitBreaker, handleAll } from 'cockatiel';
import { jitteredDelays, sleepUnlessWoken } from '../backoff.js';
import { InvalidArgumentError } from '../errors.js';
import type { LockProvider } from '../types.js';
import { createElection, type LockElectionOptions } from './lock-election.js';
import type { LeaderInfo } from './types.js';

export interface LeaderWork {
  /** Aborted when the term ends (lost, resigned, stopped): stop working. */
  signal: AbortSignal;
  /** The fencing token of this term: pass it to the storage with every write. */
  term: bigint;
}

export interface RunAsLeaderOptions extends LockElectionOptions {
  /** This candidate's identity, shown to observers. Default `<hostname>/<pid>`. */
  value?: string;
  /** Stops the loop: the current term is resigned so a successor takes over at once. */
  signal?: AbortSignal;
  /** Also stop (and resign) on SIGTERM and SIGINT. Default false. */
  handleSignals?: boolean;
  /** Pause between a term's end or a failure and the next campaign (decorrelated jitter). */
  backoff?: { initialMs?: number; maxMs?: number };
  /** After this many failed campaigns in a row, wait halfOpenAfterMs before trying again. */
  breaker?: { failures?: number; halfOpenAfterMs?: number };
  onElected?: (term: bigint) => void;
  onDemoted?: (term: bigint) => void;
  /** Every change of leader seen by this candidate, including null (no leader). */
  onLeaderChange?: (leader: LeaderInfo | null) => void;
  /** Campaign failures (backend unavailable …) and errors thrown by fn; the loop goes on. */
  onError?: (error: unknown) => void;
}

/**
 * Runs fn whenever this process leads `name`, until stopped: campaign → fn({ signal, term }) →
 * when the term ends (lost, fn returned or threw) abort its signal, resign, wait a jittered
 * backoff, campaign again. Backend errors are retried with backoff behind a circuit breaker;
 * every wait ends early when the caller stops. Resolves once stopped and resigned.
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

  const stop = new AbortController();
  const onStop = () => stop.abort(options.signal?.reason);
  if (options.signal?.aborted) return;
  options.signal?.addEventListener('abort', onStop, { once: true });
  const osSignals: NodeJS.Signals[] = options.handleSignals ? ['SIGTERM', 'SIGINT'] : [];
  for (const s of osSignals) process.on(s, onStop);

  const election = createElection(provider, name, options);
  const value = options.value ?? `${hostname()}/${process.pid}`;
  const breaker = circuitBreaker(handleAll, { halfOpenAfter, breaker: new ConsecutiveBreaker(failures) });
  const watching = watchLeader(election.observe({ signal: stop.signal }), options.onLeaderChange);
  const delays = jitteredDelays({ initialMs, maxMs });
  const pause = async () => {
    await sleepUnlessWoken(delays.next().value, stop.signal).done.catch(() => undefined);
  };

  try {
    while (!stop.signal.aborted) {
      let leadership: Awaited<ReturnType<typeof election.campaign>>;
      try {
        leadership = await breaker.execute(() => election.campaign(value, { signal: stop.signal }));
      } catch (error) {
        if (stop.signal.aborted) break;
        if (!(error instanceof BrokenCircuitError)) options.onError?.(error);
        await pause(); // never a hot loop: failures and an open circuit both wait
        continue;
      }
      options.onElected?.(leadership.term);
      const term = new AbortController();
      const endTerm = () => term.abort(leadership.signal.reason ?? stop.signal.reason);
      leadership.signal.addEventListener('abort', endTerm, { once: true });
      stop.signal.addEventListener('abort', endTerm, { once: true });
      try {
        await fn({ signal: term.signal, term: leadership.term });
      } catch (error) {
        options.onError?.(error);
      } finally {
        term.abort(new Error('the term ended'));
        leadership.signal.removeEventListener('abort', endTerm);
        stop.signal.removeEventListener('abort', endTerm);
        await leadership.resign().catch((error: unknown) => options.onError?.(error));
        options.onDemoted?.(leadership.term);
      }
      await pause();
    }
  } finally {
    options.signal?.removeEventListener('abort', onStop);
    for (const s of osSignals) process.off(s, onStop);
    stop.abort();
    await watching;
  }
}

async function watchLeader(
  changes: AsyncIterable<LeaderInfo | null>,
  onChange: ((leader: LeaderInfo | null) => void) | undefined,
): Promise<void> {
  if (!onChange) return;
  try {
    for await (const leader of changes) onChange(leader);
  } catch {
    // observing is best effort: a backend error ends it, the election loop goes on
  }
}
