import { byKey, type Fault, type Grant, type RuleTally, type Violation, type Write } from '../checker.js';
import type { TortureEvent } from '../history.js';
import { checkOverLimit } from './over-limit.js';

/**
 * The semaphore workload's own rules. Pure, like checker.ts: the same history, the same verdict.
 * `limits` maps each semaphore name to its limit.
 */

type Request = Extract<TortureEvent, { type: 'request' }>;
type Crash = Extract<TortureEvent, { type: 'crash' }>;

/** How the nemesis's own kills are recorded (SIGKILL of a process, the memory client's crash). */
const NEMESIS_KILLS = ['exit SIGKILL', 'simulated crash'];

const byTime = (events: readonly TortureEvent[]) => [...events].sort((a, b) => a.t - b.t);

/** over-limit (over-limit.ts, the one rule for every permit) on a semaphore workload's history. */
export function checkPermitsOverLimit(
  events: readonly TortureEvent[],
  limits: Record<string, number>,
): Violation[] {
  return checkOverLimit(
    events.filter((e): e is Grant => e.type === 'grant' && e.kind === 'permit'),
    events.filter((e): e is Write => e.type === 'write'),
    events.filter((e): e is Fault => e.type === 'fault'),
    (name) => limits[name] ?? Number.POSITIVE_INFINITY,
  );
}

/**
 * tokens: per name, a token is granted once, and tokens rise in real-time order: a grant whose
 * request was sent after another grant of the name had reached its holder carries a greater token
 * (the library's promise: the token rises per name across all permits). Concurrent grants may reach
 * their holders in either order, so "rise in the order the grants arrived" is not asked.
 */
export function checkPermitTokens(events: readonly TortureEvent[]): Violation[] {
  const out: Violation[] = [];
  const sorted = byTime(events);
  const grants = sorted.filter((e): e is Grant => e.type === 'grant' && e.kind === 'permit');
  const requests = sorted.filter((e): e is Request => e.type === 'request');
  for (const [name, list] of byKey(grants)) {
    const seen = new Map<string, Grant>();
    for (const g of list) {
      const other = seen.get(g.token);
      if (other)
        out.push({ rule: 'tokens', message: `${name}: token ${g.token} granted twice`, events: [other, g] });
      seen.set(g.token, g);
    }
    // Grants by arrival, with the running highest token: the highest of every grant before t.
    const byArrival = [...list].sort((a, b) => a.t - b.t);
    const highest: Grant[] = [];
    for (const g of byArrival) {
      const top = highest.at(-1);
      highest.push(top && BigInt(top.token) >= BigInt(g.token) ? top : g);
    }
    for (const g of list) {
      const request = requestOf(requests, g);
      if (!request) continue;
      const before = lastIndexBefore(byArrival, request.t);
      const top = before >= 0 ? highest[before] : undefined;
      if (top && top !== g && BigInt(top.token) >= BigInt(g.token)) {
        out.push({
          rule: 'tokens',
          message: `${name}: token ${g.token} (${g.grant}) requested after token ${top.token} (${top.grant}) was granted`,
          events: [top, request, g],
        });
      }
    }
  }
  return out;
}

/** The request a grant answers: its worker's last request of the name before it (one at a time). */
function requestOf(requests: readonly Request[], g: Grant): Request | undefined {
  return requests.findLast((r) => r.worker === g.worker && r.key === g.key && r.t <= g.t);
}

/** Index of the last item with t < at, items sorted by t; -1 if none. */
function lastIndexBefore(items: readonly { t: number }[], at: number): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((items[mid]?.t ?? 0) < at) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

export interface PermitsReturnOptions {
  limits: Record<string, number>;
  /** The lease: a killed holder's permits are free at the server by its kill + ttlMs. */
  ttlMs: number;
  /** How long a request for every permit of a name may wait once nothing dead or faulty holds them. */
  boundMs: number;
  /** Counts the requests judged. */
  tally?: RuleTally;
}

/**
 * permits-return: a request for all `limit` permits of a name (the probe worker asks for them in
 * turn) is granted within boundMs of the moment the name must be whole again. That moment, `ready`,
 * is the request's start, moved past kill + ttlMs for every holder of the name the nemesis killed
 * meanwhile (its lease runs out by then: its last renewal was before the kill). A crashed holder whose
 * permits never come back keeps such a request waiting, and this rule sees it.
 *
 * Judged only where the answer is known and nothing else explains the wait: the request ended
 * (a grant, or an error such as its timeout or the worker's stop, after `ready + boundMs`), and no
 * other fault touched [request, ready + boundMs + ttlMs] — a frozen, cut off or delayed worker
 * can hold permits or a queue place for up to a lease after the fault heals, and a server fault
 * stops every grant. boundMs covers the holders and waiters ahead of the request.
 */
export function checkPermitsReturn(
  events: readonly TortureEvent[],
  options: PermitsReturnOptions,
): Violation[] {
  const { limits, ttlMs, boundMs } = options;
  const out: Violation[] = [];
  const sorted = byTime(events);
  const kills = sorted.filter((e): e is Crash => e.type === 'crash' && NEMESIS_KILLS.includes(e.detail));
  const faults = sorted.filter((e): e is Fault => e.type === 'fault' && e.kind !== 'killWorker');
  const byWorker = new Map<string, TortureEvent[]>();
  for (const e of sorted) {
    if (!('worker' in e)) continue;
    const list = byWorker.get(e.worker) ?? [];
    list.push(e);
    byWorker.set(e.worker, list);
  }
  for (const list of byWorker.values()) {
    list.forEach((request, i) => {
      if (request.type !== 'request' || request.permits === undefined) return;
      if (request.permits !== limits[request.key]) return;
      const outcome = findFrom(list, i + 1, (e) => ANSWERS.includes(e.type));
      if (!outcome || (outcome.type !== 'grant' && outcome.type !== 'acquire-error')) return;
      const holderKills = kills.filter((k) => heldAtKill(sorted, k, request.key, ttlMs));
      let ready = request.t;
      for (const k of holderKills) if (k.t < ready + boundMs && k.t + ttlMs > ready) ready = k.t + ttlMs;
      const deadline = ready + boundMs;
      const tally = options.tally ?? { judged: 0 };
      if (outcome.t <= deadline) {
        if (outcome.type === 'grant') tally.judged++; // an early error (a cancel) shows nothing
        return;
      }
      const disturbed = faults.some((f) => f.t <= deadline && f.tEnd + ttlMs >= request.t);
      if (disturbed) return;
      tally.judged++;
      const waited = Math.round(outcome.t - ready);
      out.push({
        rule: 'permits-return',
        message: `${request.key}: all ${request.permits} permits ${
          outcome.type === 'grant' ? 'granted' : `still not granted (${outcome.code})`
        } ${waited} ms after every dead holder's lease had run out (bound ${boundMs} ms)`,
        events: [
          request,
          ...holderKills.filter((k) => k.t >= request.t - ttlMs && k.t <= outcome.t),
          outcome,
        ],
      });
    });
  }
  return out;
}

/**
 * Whether the killed worker may still have held permits of `name` at the server when it died: a
 * grant of the name before the kill not released long before it (a release() cut short leaves
 * the lease to run out, within ttlMs of the call).
 */
function heldAtKill(events: readonly TortureEvent[], kill: Crash, name: string, ttlMs: number): boolean {
  const released = new Set(
    events.flatMap((e) =>
      e.type === 'release' && e.worker === kill.worker && e.t <= kill.t - ttlMs ? [e.grant] : [],
    ),
  );
  return events.some(
    (e) =>
      e.type === 'grant' &&
      e.worker === kill.worker &&
      e.key === name &&
      e.t < kill.t &&
      !released.has(e.grant),
  );
}

/** What ends a worker's request: its grant, its error, its death, or (never) its next request. */
const ANSWERS: readonly TortureEvent['type'][] = ['grant', 'acquire-error', 'crash', 'request'];

function findFrom<T>(items: readonly T[], from: number, test: (item: T) => boolean): T | undefined {
  for (let i = from; i < items.length; i++) {
    const item = items[i] as T;
    if (test(item)) return item;
  }
  return undefined;
}
