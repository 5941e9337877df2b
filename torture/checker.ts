import type { TortureEvent } from './history.js';

export type Grant = Extract<TortureEvent, { type: 'grant' }>;
export type Write = Extract<TortureEvent, { type: 'write' }>;
export type Fault = Extract<TortureEvent, { type: 'fault' }>;

/** The lock workload's rules; other workloads add their own names (see workloads/). */
export type Rule =
  | 'tokens'
  | 'overlap'
  | 'born-lost'
  | 'stale-write'
  | 'progress'
  | 'leftover'
  | 'crash'
  | (string & {});

export interface Violation {
  rule: Rule;
  message: string;
  events: TortureEvent[];
}

export interface CheckOptions {
  /** After a fault heals, a grant must come within this many ms (TTL/session + margin). */
  progressBoundMs: number;
  /** The lease the workers asked for; with `late` faults, a reply later than this was already lost. */
  ttlMs?: number;
  /** Rules of checkHistory that do not apply to a workload (a semaphore's grants overlap by design). */
  skip?: readonly Rule[];
}

export interface CheckResult {
  violations: Violation[];
  grants: number;
  writesAccepted: number;
  writesRejected: number;
  /** Writes made with an aborted signal (a zombie trying) that the storage rejected / accepted. */
  staleRejected: number;
  faults: Record<string, number>;
  /** Longest wait from a heal to the next grant, ms. */
  maxProgressMs: number;
  /**
   * How many cases each rule that stands aside while a fault could explain the outcome judged
   * (permits-return, failover): a rule that judged none in a run could not have failed in it.
   */
  judged?: Record<string, number>;
}

/** Counts the cases a rule judged (see CheckResult.judged). */
export interface RuleTally {
  judged: number;
}

/**
 * Checks a recorded history. Pure: the same events give the same verdict.
 *
 * A holder frozen by SIGSTOP cannot run its signal's timers, so its own view of "live" is not
 * trusted once it has been frozen while holding; fencing (rule stale-write) is what covers it.
 */
export function checkHistory(events: readonly TortureEvent[], options: CheckOptions): CheckResult {
  const sorted = [...events].sort((a, b) => a.t - b.t);
  const grants = sorted.filter((e): e is Grant => e.type === 'grant');
  const writes = sorted.filter((e): e is Write => e.type === 'write');
  const faults = sorted.filter((e): e is Fault => e.type === 'fault');
  const skip = new Set(options.skip ?? []);
  const violations: Violation[] = [
    ...checkTokens(grants),
    ...checkBornLost(grants, faults),
    ...checkLateGrants(grants, faults, options.ttlMs),
    ...(skip.has('overlap') ? [] : checkOverlaps(grants, writes, faults)),
    ...checkStaleWrites(writes),
    ...checkCrashes(sorted),
  ].filter((v) => !skip.has(v.rule));
  const progress = checkProgress(grants, faults, options.progressBoundMs);
  if (!skip.has('progress')) violations.push(...progress.violations);
  for (const e of sorted) {
    if (e.type === 'leftover') violations.push({ rule: 'leftover', message: e.detail, events: [e] });
  }
  const faultCounts: Record<string, number> = {};
  for (const f of faults) faultCounts[f.kind] = (faultCounts[f.kind] ?? 0) + 1;
  const accepted = writes.filter((w) => w.result === 'accepted');
  return {
    violations,
    grants: grants.length,
    writesAccepted: accepted.length,
    writesRejected: writes.filter((w) => w.result === 'rejected').length,
    staleRejected: writes.filter((w) => !w.live && w.result === 'rejected').length,
    faults: faultCounts,
    maxProgressMs: progress.maxMs,
  };
}

export function byKey<T extends { key: string }>(items: readonly T[]): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const list = map.get(item.key) ?? [];
    list.push(item);
    map.set(item.key, list);
  }
  return map;
}

/** Rule 1: per key, tokens are unique and rise in the order the grants reached their holders. */
export function checkTokens(grants: readonly Grant[]): Violation[] {
  const out: Violation[] = [];
  for (const [key, list] of byKey(grants)) {
    const seen = new Map<string, Grant>();
    let previous: Grant | undefined;
    for (const g of list) {
      const other = seen.get(g.token);
      if (other)
        out.push({ rule: 'tokens', message: `${key}: token ${g.token} granted twice`, events: [other, g] });
      seen.set(g.token, g);
      if (previous && !other && BigInt(g.token) <= BigInt(previous.token)) {
        out.push({
          rule: 'tokens',
          message: `${key}: token ${g.token} granted after ${previous.token}`,
          events: [previous, g],
        });
      }
      previous = g;
    }
  }
  return out;
}

/**
 * Rule 2b: no grant or term reaches the user already aborted; and no term reaches it live when
 * its own lock had already lost its signal (a term signal that does not derive from its lock's).
 *
 * Except right after a stall of the whole process (memory's stallProcess, a GC pause): it runs
 * between two steps of any promise chain, so it can fall after the library's last look at the
 * lease and before the caller's code runs — a pause no library can tell from one in the caller.
 */
export function checkBornLost(grants: readonly Grant[], faults: readonly Fault[] = []): Violation[] {
  const out: Violation[] = [];
  for (const g of grants) {
    if (g.abortedAtGrant && handedOutAcrossStall(g, faults)) continue;
    if (g.abortedAtGrant) {
      out.push({
        rule: 'born-lost',
        message: `${g.key}: ${g.kind} ${g.token} (${g.grant}) handed out with its signal already aborted`,
        events: [g],
      });
    } else if (g.lockAborted) {
      out.push({
        rule: 'born-lost',
        message: `${g.key}: term ${g.token} (${g.grant}) handed out live though its lock's signal was already aborted`,
        events: [g],
      });
    }
  }
  return out;
}

/**
 * How long after a whole-process stall's recorded end a grant may still have been handed out
 * across it: the nemesis stamps the end a few promise steps after the stall, and the continuations
 * of five workloads' workers queued meanwhile (and their overdue timers) run just before or after,
 * for longer on a busy machine.
 */
const STALL_HANDOUT_MS = 250;

/**
 * The grant's hand-out straddled a stall of the whole process (memory's stallProcess): its worker
 * was in it, and it was recorded between the stall's start and just after its recorded end. Only
 * that in-process stall can fall between the library's last look and the caller's code (promise
 * steps of one process); a SIGSTOP of a forked worker stops it between two instructions, so a
 * grant it records aborted was handed out aborted.
 */
function handedOutAcrossStall(g: Grant, faults: readonly Fault[]): boolean {
  return faults.some(
    (f) =>
      f.kind === 'stallProcess' &&
      f.pausedWorkers.includes(g.worker) &&
      f.t <= g.t &&
      g.t - f.tEnd < STALL_HANDOUT_MS,
  );
}

/**
 * Rule 6: a worker ends only when asked or killed by the nemesis. Any other end (an uncaught
 * error, a stop that did not finish in time) is the library crashing the process or hanging close().
 */
export function checkCrashes(events: readonly TortureEvent[]): Violation[] {
  const out: Violation[] = [];
  for (const e of events) {
    if (e.type !== 'crash' || NEMESIS_CRASHES.includes(e.detail)) continue;
    out.push({ rule: 'crash', message: `${e.worker}: ${e.detail}`, events: [e] });
  }
  return out;
}

/** How the nemesis's own kills are recorded (SIGKILL of a process, the memory client's crash). */
const NEMESIS_CRASHES = ['exit SIGKILL', 'simulated crash'];

/**
 * Rule 2b, seen from outside: while a delay fault holds back a worker's replies longer than the
 * lease, every reply that reaches it was sent `late` ms earlier (the fault heals with a reset, so
 * nothing held back arrives after it): a grant it receives then had run out at the server and must
 * not reach the user live.
 */
export function checkLateGrants(
  grants: readonly Grant[],
  faults: readonly Fault[],
  ttlMs: number | undefined,
): Violation[] {
  if (ttlMs === undefined) return [];
  const out: Violation[] = [];
  const SLACK_MS = 100;
  for (const f of faults) {
    const late = f.late;
    if (!late || late.ms <= ttlMs + SLACK_MS) continue;
    for (const g of grants) {
      if (g.worker !== late.worker || g.abortedAtGrant) continue;
      if (g.t > f.t + late.ms && g.t <= f.tEnd) {
        out.push({
          rule: 'born-lost',
          message: `${g.key}: ${g.grant} (token ${g.token}) handed out live though its reply was ${late.ms} ms late, past its ${ttlMs} ms lease`,
          events: [f, g],
        });
      }
    }
  }
  return out;
}

/** Was `worker` frozen by the nemesis at some time in (from, to]? */
export function frozenBetween(faults: readonly Fault[], worker: string, from: number, to: number): boolean {
  return faults.some((f) => f.pausedWorkers.includes(worker) && f.t <= to && f.tEnd > from);
}

/**
 * Rule 2: a grant's live interval runs from its grant to the last time its holder saw its signal
 * live (a write's check). No other grant of the key may see itself live inside that interval:
 * at that instant both signals were un-aborted.
 */
export function checkOverlaps(
  grants: readonly Grant[],
  writes: readonly Write[],
  faults: readonly Fault[],
): Violation[] {
  const out: Violation[] = [];
  const grantById = new Map(grants.map((g) => [g.grant, g]));
  // Live points per grant: the grant itself, and every write checked live before any freeze.
  const points = new Map<string, TortureEvent[]>();
  for (const g of grants) if (!g.abortedAtGrant) points.set(g.grant, [g]);
  for (const w of writes) {
    const g = grantById.get(w.grant);
    if (!g || !w.live || g.abortedAtGrant) continue;
    if (frozenBetween(faults, w.worker, g.t, w.t)) continue;
    points.get(g.grant)?.push(w);
  }
  for (const [key, list] of byKey(grants)) {
    const intervals = list
      .filter((g) => points.has(g.grant))
      .map((g) => {
        const ps = points.get(g.grant) ?? [g];
        return { g, end: ps.at(-1) ?? g };
      });
    for (const a of intervals) {
      for (const point of points.get(a.g.grant) ?? []) {
        for (const b of intervals) {
          if (b.g.grant === a.g.grant) continue;
          if (point.t > b.g.t && point.t < b.end.t) {
            out.push({
              rule: 'overlap',
              message: `${key}: ${a.g.grant} (token ${a.g.token}) was live while ${b.g.grant} (token ${b.g.token}) held and saw itself live later`,
              events: [b.g, point, b.end],
            });
          }
        }
      }
    }
  }
  return out;
}

/**
 * Rule 3: once the storage accepted token T for a key, it never accepts a lower one from a write
 * that started after that acceptance.
 */
export function checkStaleWrites(writes: readonly Write[]): Violation[] {
  const out: Violation[] = [];
  for (const [key, list] of byKey(writes.filter((w) => w.result === 'accepted'))) {
    const byEnd = [...list].sort((a, b) => a.tEnd - b.tEnd);
    for (const w of list) {
      const higher = byEnd.find((x) => x.tEnd < w.t && BigInt(x.token) > BigInt(w.token));
      if (higher) {
        out.push({
          rule: 'stale-write',
          message: `${key}: token ${w.token} accepted after token ${higher.token} was`,
          events: [higher, w],
        });
      }
    }
  }
  return out;
}

/**
 * Rule 4: a grant follows every heal within the bound, unless the next fault starts first; and a
 * run that granted nothing made no progress at all.
 */
export function checkProgress(
  grants: readonly Grant[],
  faults: readonly Fault[],
  boundMs: number,
): { violations: Violation[]; maxMs: number } {
  const violations: Violation[] = [];
  let maxMs = 0;
  if (grants.length === 0) {
    violations.push({ rule: 'progress', message: 'no grant in the whole run', events: [] });
    return { violations, maxMs };
  }
  const live = grants.filter((g) => !g.abortedAtGrant);
  for (const f of faults) {
    // Another fault still active at this heal, or starting before the bound, answers for the gap.
    if (faults.some((o) => o !== f && o.t <= f.tEnd && o.tEnd > f.tEnd)) continue;
    const nextFault = faults.find((o) => o.t > f.tEnd);
    const next = live.find((g) => g.t > f.tEnd);
    const waited = next ? next.t - f.tEnd : Number.POSITIVE_INFINITY;
    if (!nextFault || nextFault.t - f.tEnd >= boundMs) {
      if (waited > boundMs) {
        violations.push({
          rule: 'progress',
          message: `no grant within ${boundMs} ms after ${f.kind} on ${f.target} healed`,
          events: [f],
        });
      }
      if (Number.isFinite(waited)) maxMs = Math.max(maxMs, waited);
    }
  }
  return { violations, maxMs };
}
