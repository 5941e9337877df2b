import { byKey, type Grant, type Violation } from '../checker.js';
import type { TortureEvent } from '../history.js';

export type Outcome = Extract<TortureEvent, { type: 'outcome' }>;
export type FinalState = Extract<TortureEvent, { type: 'final' }>;

/**
 * The idempotency store's promises, checked on a history. Pure: the same events give the same
 * verdict.
 *
 * What "the effect is applied once" can mean. A run paused past its lease may have written its
 * effect before it froze; the run that takes the record over writes it again, with a higher token.
 * No store can undo the first write. What it promises is that exactly one run counts: the one whose
 * completion is stored (the last run of the key, since a takeover refuses every earlier run's
 * completion), every caller gets that run's result, and the effect's final state is that run's
 * write (fencing rejects every later write of a lower token: the checker's stale-write rule).
 * Records are kept for the whole run (retention far past it), so a key's record is never legitimately
 * gone.
 */

/** Per key: the stored run, if the history says which (the final read, else what callers got). */
function storedResults(
  outcomes: readonly Outcome[],
  finals: readonly FinalState[],
): Map<string, { result: string; final: boolean }> {
  const stored = new Map<string, { result: string; final: boolean }>();
  for (const o of outcomes)
    if (o.result !== undefined && !stored.has(o.key))
      stored.set(o.key, { result: o.result, final: !!o.final });
  for (const f of finals) if (f.stored) stored.set(f.key, f.stored);
  return stored;
}

const describe = (r: { result: string; final: boolean }) => `${r.final ? 'final error ' : ''}${r.result}`;

/**
 * one-result: per key, every caller that got a result (a value or a FinalError, replayed or not) got
 * the same one; a caller told its result was fresh (not replayed) got its own run's; and the record
 * still replays that result at the end (the final read).
 */
export function checkOneResult(outcomes: readonly Outcome[], finals: readonly FinalState[]): Violation[] {
  const out: Violation[] = [];
  const finalByKey = new Map(finals.map((f) => [f.key, f]));
  for (const [key, list] of byKey(outcomes.filter((o) => o.result !== undefined))) {
    const first = list[0] as Outcome;
    const expected = finalByKey.get(key)?.stored ?? { result: first.result ?? '', final: !!first.final };
    for (const o of list) {
      if (o.replayed === false && o.result !== o.run) {
        out.push({
          rule: 'one-result',
          message: `${key}: ${o.worker} got ${o.result} as its own fresh result, but its fn ran as ${o.run ?? 'nothing'}`,
          events: [o],
        });
      }
      if (o.result !== expected.result || !!o.final !== expected.final) {
        out.push({
          rule: 'one-result',
          message: `${key}: ${o.worker} got ${describe({ result: o.result ?? '', final: !!o.final })} (${o.replayed ? 'replayed' : 'fresh'}) but the key's result is ${describe(expected)}`,
          events: [o, ...(finalByKey.has(key) ? [finalByKey.get(key) as FinalState] : [first])],
        });
      }
    }
    const final = finalByKey.get(key);
    if (final && !final.stored) {
      out.push({
        rule: 'one-result',
        message: `${key}: callers got ${describe(expected)} but the record no longer replays any result`,
        events: [first, final],
      });
    }
  }
  return out;
}

/**
 * late-completion: a takeover refuses the completion of every earlier run of the key. So the run
 * whose result is stored, and any run whose caller was told its result is fresh, is the last run
 * of its key: no run of the key has a higher token. A run whose signal aborted may still complete
 * when nobody took its record over (its outcome is stored within the lease): the token, not the
 * signal, is what decides.
 */
export function checkLateCompletion(
  grants: readonly Grant[],
  outcomes: readonly Outcome[],
  finals: readonly FinalState[],
): Violation[] {
  const out: Violation[] = [];
  const runs = grants.filter((g) => g.kind === 'run');
  const runById = new Map(runs.map((g) => [g.grant, g]));
  const runsByKey = byKey(runs);
  const completed = new Map<string, TortureEvent>(); // run → the event that says it completed
  for (const [key, stored] of storedResults(outcomes, finals)) {
    const by =
      finals.find((f) => f.key === key) ?? outcomes.find((o) => o.key === key && o.result !== undefined);
    if (by) completed.set(stored.result, by);
  }
  for (const o of outcomes) if (o.replayed === false && o.run && o.result === o.run) completed.set(o.run, o);
  for (const [run, by] of completed) {
    const g = runById.get(run);
    if (!g) continue;
    const later = (runsByKey.get(g.key) ?? []).find((x) => BigInt(x.token) > BigInt(g.token));
    if (later) {
      out.push({
        rule: 'late-completion',
        message: `${g.key}: ${run} (token ${g.token}) completed though ${later.grant} (token ${later.token}) had taken the record over`,
        events: [g, later, by],
      });
    }
  }
  return out;
}

/**
 * effect: the effect's final state is the stored run's write (its name, with its token). Together
 * with stale-write (no lower token accepted after a higher one) this is "applied once": a run that
 * was taken over may have written first, but its write does not stand.
 */
export function checkEffect(grants: readonly Grant[], finals: readonly FinalState[]): Violation[] {
  const out: Violation[] = [];
  const runById = new Map(grants.filter((g) => g.kind === 'run').map((g) => [g.grant, g]));
  for (const f of finals) {
    if (!f.stored) continue;
    const g = runById.get(f.stored.result);
    const wrongRun = f.effect.value !== f.stored.result;
    const wrongToken = g !== undefined && f.effect.token !== g.token;
    if (wrongRun || wrongToken) {
      out.push({
        rule: 'effect',
        message: `${f.key}: the stored result is ${f.stored.result}${g ? ` (token ${g.token})` : ''} but the effect stands as written by ${f.effect.value ?? 'nobody'} (token ${f.effect.token ?? '-'})`,
        events: [f, ...(g ? [g] : [])],
      });
    }
  }
  return out;
}

/** typed-error: a caller that got no result got a typed error (a FencekitError or fn's own). */
export function checkTypedErrors(outcomes: readonly Outcome[]): Violation[] {
  return outcomes
    .filter((o) => o.untyped)
    .map((o) => ({
      rule: 'typed-error',
      message: `${o.key}: ${o.worker} got an untyped error: ${o.error ?? 'unknown'}`,
      events: [o],
    }));
}

/** Every idempotency rule above, on a sorted history. */
export function checkIdempotency(events: readonly TortureEvent[]): Violation[] {
  const grants = events.filter((e): e is Grant => e.type === 'grant');
  const outcomes = events.filter((e): e is Outcome => e.type === 'outcome');
  const finals = events.filter((e): e is FinalState => e.type === 'final');
  return [
    ...checkOneResult(outcomes, finals),
    ...checkLateCompletion(grants, outcomes, finals),
    ...checkEffect(grants, finals),
    ...checkTypedErrors(outcomes),
  ];
}
