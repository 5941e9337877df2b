import { byKey, type Fault, frozenBetween, type Grant, type Violation, type Write } from '../checker.js';

/**
 * A semaphore's rules, seen from its holders (the semaphore workload's and the facades'): at no
 * instant do more than `limit` permits of a name believe themselves held, and no token is handed
 * out twice. Tokens need not rise in the order grants reach their holders: two permits granted
 * together reach two processes in either order.
 */

/** A holder's look at its signal just before it acts (a write, or a reader's read). */
export type LiveCheck = Pick<Write, 'grant' | 'live' | 'worker' | 't'>;

/** One grant's believed interval: from its grant to the last instant its holder saw it live. */
export interface Believed {
  grant: Grant;
  end: number;
}

/**
 * The believed intervals of `grants`, as checkOverlaps draws them for locks: from the grant (unless
 * handed out already lost) to the last write (or read, for a reader) checked live. A holder acts on its belief only where
 * it checks it, so a signal's abort stamp (a timer, late on a busy machine) is not the end; a
 * write after the holder was frozen is not its own view (a frozen process cannot run the timers
 * that end its belief).
 */
export function believedIntervals(
  grants: readonly Grant[],
  checks: readonly LiveCheck[],
  faults: readonly Fault[],
): Believed[] {
  const byGrant = new Map<string, Believed>();
  for (const g of grants) if (!g.abortedAtGrant) byGrant.set(g.grant, { grant: g, end: g.t });
  for (const w of checks) {
    const believed = byGrant.get(w.grant);
    if (!believed || !w.live || frozenBetween(faults, w.worker, believed.grant.t, w.t)) continue;
    believed.end = Math.max(believed.end, w.t);
  }
  return [...byGrant.values()];
}

/**
 * Rule over-limit: at each permit grant's instant, its permits and those of every other grant
 * believed held across that instant (granted before, seen live after; or granted at the same
 * instant) are at most the name's limit. Checking at grants suffices: a sum of intervals peaks
 * where one of them starts.
 */
export function checkOverLimit(
  grants: readonly Grant[],
  writes: readonly Write[],
  faults: readonly Fault[],
  limitOf: (key: string) => number,
): Violation[] {
  const out: Violation[] = [];
  for (const [key, list] of byKey(
    believedIntervals(grants, writes, faults).map((b) => ({ ...b, key: b.grant.key })),
  )) {
    const limit = limitOf(key);
    for (const a of list) {
      const at = a.grant.t;
      const across = list.filter((b) => b !== a && b.grant.t <= at && (at < b.end || b.grant.t === at));
      const held = [a, ...across].reduce((sum, b) => sum + (b.grant.permits ?? 1), 0);
      if (held > limit) {
        out.push({
          rule: 'over-limit',
          message: `${key}: ${held} permits believed held at once (limit ${limit}) when ${a.grant.grant} (token ${a.grant.token}) was granted, beside ${across.map((b) => b.grant.grant).join(', ')}`,
          events: [...across.map((b) => b.grant), a.grant],
        });
      }
    }
  }
  return out;
}

/** Rule tokens, for permits: per name, no token is handed out twice. */
export function checkPermitTokens(grants: readonly Grant[]): Violation[] {
  const out: Violation[] = [];
  for (const [key, list] of byKey(grants)) {
    const seen = new Map<string, Grant>();
    for (const g of list) {
      const other = seen.get(g.token);
      if (other)
        out.push({ rule: 'tokens', message: `${key}: token ${g.token} granted twice`, events: [other, g] });
      seen.set(g.token, g);
    }
  }
  return out;
}
