import { byKey, type Fault, frozenBetween, type Grant, type RuleTally, type Violation } from '../checker.js';
import type { TortureEvent } from '../history.js';

type Proclaim = Extract<TortureEvent, { type: 'proclaim' }>;
type Resigned = Extract<TortureEvent, { type: 'resigned' }>;
type Crash = Extract<TortureEvent, { type: 'crash' }>;

export interface StaleObserveOptions {
  /**
   * How long before a report the read behind it may have started, for an observer that was not
   * frozen meanwhile: every backend call has a deadline (callTimeoutMs), plus slack for a loaded
   * machine's event loop.
   */
  readWindowMs: number;
  /**
   * A resign() that resolved within this long, with no fault anywhere meanwhile, deleted the term's
   * key on the server (a slower one may have given up waiting for the confirmation, e.g. etcd's
   * release waits at most callTimeoutMs).
   */
  resignConfirmedMs: number;
}

/** When a term had certainly ended on the server, and the event that shows it. */
interface TermEnd {
  t: number;
  by: TortureEvent;
}

/**
 * Rule `stale-observe`: a leader report (observe() or leader()) never names a term, or a value of
 * that term, that had already been replaced before the read behind the report could have started.
 *
 * - A term T of a name ended on the server no later than (a) the first grant of a higher term of
 *   the name reaching its holder (the server granted it earlier, and a higher term is granted only
 *   once T's key is gone), or (b) T's resign() resolving, when T was still live when it was called,
 *   it resolved within resignConfirmedMs and no fault of any kind overlapped the call.
 * - A value of T was replaced once a proclaim of T to a later value resolved (values are unique).
 * - The read behind a report started no earlier than its `since` (leader(): the call; observe():
 *   the previous report or the observe() call — the iterator reads only when asked for the next
 *   value), nor, for observe() reports of an observer not frozen within readWindowMs before the
 *   report, earlier than readWindowMs before it.
 *
 * A report is stale when its term ended, or its value was replaced, before that earliest start.
 * Reports of null (no leader) are not judged; observe() promises changes, not how soon.
 */
export function checkStaleObserves(
  events: readonly TortureEvent[],
  options: StaleObserveOptions,
): Violation[] {
  const sorted = [...events].sort((a, b) => a.t - b.t);
  const faults = sorted.filter((e): e is Fault => e.type === 'fault');
  const grants = sorted.filter(
    (e): e is Grant => e.type === 'grant' && e.kind === 'term' && !e.abortedAtGrant,
  );
  const proclaims = new Map<string, Proclaim[]>();
  for (const e of sorted) {
    if (e.type !== 'proclaim') continue;
    const list = proclaims.get(e.grant) ?? [];
    list.push(e);
    proclaims.set(e.grant, list);
  }
  const abortedAt = new Map<string, number>();
  for (const e of sorted) if (e.type === 'abort' && !abortedAt.has(e.grant)) abortedAt.set(e.grant, e.t);
  const resignEnds = new Map<string, Resigned>();
  for (const e of sorted) {
    if (e.type !== 'resigned' || e.t - e.tStart > options.resignConfirmedMs) continue;
    // A term already lost when resigned may still hold its key (a ZooKeeper session the client
    // gave up on lives on at the server until it expires): its resign proves nothing.
    if ((abortedAt.get(e.grant) ?? Number.POSITIVE_INFINITY) < e.tStart) continue;
    if (faults.some((f) => f.t <= e.t && f.tEnd >= e.tStart)) continue;
    resignEnds.set(e.grant, e);
  }
  const grantsByKey = byKey(grants);
  const out: Violation[] = [];
  for (const o of sorted) {
    if (o.type !== 'observe' || o.term === null) continue;
    const term = BigInt(o.term);
    const keyGrants = grantsByKey.get(o.key) ?? [];
    const readFrom =
      o.via === 'observe' && !frozenBetween(faults, o.worker, o.t - options.readWindowMs, o.t)
        ? Math.max(o.since, o.t - options.readWindowMs)
        : o.since;
    const own = keyGrants.find((g) => BigInt(g.token) === term);
    const end = termEnd(term, keyGrants, own && resignEnds.get(own.grant));
    if (end && end.t < readFrom) {
      out.push({
        rule: 'stale-observe',
        message: `${o.key}: ${o.worker} was told (${o.via}) that term ${o.term} leads, ${Math.round(o.t - end.t)} ms after it ended (${end.by.type} of ${describe(end.by)}); its read started after ${Math.round(readFrom)}`,
        events: [end.by, o],
      });
      continue;
    }
    const replaced =
      own && o.value !== null ? valueReplaced(proclaims.get(own.grant) ?? [], o.value) : undefined;
    if (replaced && replaced.t < readFrom) {
      out.push({
        rule: 'stale-observe',
        message: `${o.key}: ${o.worker} was told (${o.via}) that term ${o.term} advertises ${o.value}, ${Math.round(o.t - replaced.t)} ms after it proclaimed ${replaced.value}`,
        events: [replaced, o],
      });
    }
  }
  return out;
}

/** The earliest evidence that term ended on the server: a higher term's grant, or its confirmed resign. */
function termEnd(
  term: bigint,
  keyGrants: readonly Grant[],
  resigned: Resigned | undefined,
): TermEnd | undefined {
  const successor = keyGrants.find((g) => BigInt(g.token) > term);
  const candidates: TermEnd[] = [
    ...(successor ? [{ t: successor.t, by: successor }] : []),
    ...(resigned ? [{ t: resigned.t, by: resigned }] : []),
  ];
  return candidates.sort((a, b) => a.t - b.t)[0];
}

/**
 * The proclaim that replaced `value` (the campaign's value when no proclaim names it): the next
 * one that resolved. A proclaim whose call failed unrefused may have been applied or not: it
 * replaces nothing for sure, and a report of its value is a report of a value the term had.
 */
function valueReplaced(proclaimed: readonly Proclaim[], value: string): Proclaim | undefined {
  const index = proclaimed.findIndex((p) => p.value === value); // -1: the campaign's value
  return proclaimed.slice(index + 1).find((p) => !p.unconfirmed);
}

function describe(e: TortureEvent): string {
  if (e.type === 'grant') return `${e.grant} (token ${e.token}) at ${Math.round(e.t)}`;
  if (e.type === 'resigned') return `${e.grant} at ${Math.round(e.t)}`;
  return `${e.type} at ${Math.round(e.t)}`;
}

/** How the nemesis's own kills are recorded (SIGKILL of a process, the memory client's crash). */
const KILLS = ['exit SIGKILL', 'simulated crash'];

/** Faults aimed at holders only: after a kill they follow the next grant (or hit another workload). */
const HOLDER_FAULTS = ['killWorker', 'pauseHolder', 'stallAfterAcquire'];

export interface FailoverOptions {
  /** A new term follows a leader's kill within this (the leader's lease, a campaign, slack). */
  boundMs: number;
  /** What a fault that can hold a failover up costs on top of its own length (a lease running out). */
  recoveryMs: number;
  /** Counts the kills judged. */
  tally?: RuleTally;
}

/**
 * Rule `failover`: after the nemesis kills a worker holding a term T (its last term grant before
 * the kill, not released), a higher term of the name is granted no later than boundMs after the
 * kill (it may come earlier, when T was already lost). A fault that can hold the failover up —
 * one on the backend, or one freezing, cutting off or slowing a candidate — that overlaps the
 * window lengthens it by its overlap plus recoveryMs (the candidate's own lease running out);
 * faults that only hit holders do not (they follow the next grant). A kill whose deadline falls
 * after the workers were asked to stop is not judged.
 */
export function checkFailovers(events: readonly TortureEvent[], options: FailoverOptions): Violation[] {
  const sorted = [...events].sort((a, b) => a.t - b.t);
  const grants = sorted.filter(
    (e): e is Grant => e.type === 'grant' && e.kind === 'term' && !e.abortedAtGrant,
  );
  const candidates = new Set(
    sorted.flatMap((e) => (e.type === 'request' || e.type === 'grant' ? [e.worker] : [])),
  );
  const hindering = sorted.filter((e): e is Fault => {
    if (e.type !== 'fault' || HOLDER_FAULTS.includes(e.kind)) return false;
    return !e.workers || e.workers.some((w) => candidates.has(w));
  });
  const runEnd = sorted.find((e) => e.type === 'stopping')?.t ?? sorted.at(-1)?.t ?? 0;
  const out: Violation[] = [];
  for (const crash of sorted.filter((e): e is Crash => e.type === 'crash' && KILLS.includes(e.detail))) {
    const held = heldAt(sorted, crash);
    if (!held) continue;
    let deadline = crash.t + options.boundMs;
    const counted = new Set<Fault>();
    for (let grew = true; grew; ) {
      grew = false;
      for (const f of hindering) {
        if (counted.has(f) || f.t >= deadline || f.tEnd <= crash.t) continue;
        counted.add(f);
        deadline += f.tEnd - Math.max(f.t, crash.t) + options.recoveryMs;
        grew = true;
      }
    }
    if (deadline > runEnd) continue;
    if (options.tally) options.tally.judged++;
    const term = BigInt(held.token);
    const next = grants.find((g) => g.key === held.key && BigInt(g.token) > term);
    if (!next || next.t > deadline) {
      out.push({
        rule: 'failover',
        message: `${held.key}: no term after ${held.token} within ${Math.round(deadline - crash.t)} ms of ${crash.worker}'s kill (it held that term)${next ? `; the next came ${Math.round(next.t - crash.t)} ms after it` : ''}`,
        events: [held, crash, ...(next ? [next] : []), ...counted],
      });
    }
  }
  return out;
}

/** The term the crashed worker held when it was killed: its last term grant, not released. */
function heldAt(sorted: readonly TortureEvent[], crash: Crash): Grant | undefined {
  let held: Grant | undefined;
  for (const e of sorted) {
    if (e.t > crash.t) break;
    if (e.type === 'grant' && e.worker === crash.worker) held = e.kind === 'term' ? e : undefined;
    if (e.type === 'release' && held && e.grant === held.grant) held = undefined;
  }
  return held;
}
