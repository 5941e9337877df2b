import { byKey, type Fault, type Grant, type Violation } from '../checker.js';
import type { TortureEvent } from '../history.js';
import { type Believed, believedIntervals, type LiveCheck } from './over-limit.js';

/**
 * The read-write workload's own rules. Pure, like checker.ts: the same history, the same verdict.
 * Readers may share a name; a writer shares it with nobody but the read that continues it (a
 * downgrade), which is the same grant and carries its token.
 */

const byTime = <T extends { t: number }>(events: readonly T[]) => [...events].sort((a, b) => a.t - b.t);

const rwGrants = (events: readonly TortureEvent[]) =>
  byTime(events).filter((e): e is Grant => e.type === 'grant' && (e.kind === 'read' || e.kind === 'write'));

/** A downgrade's read and the write it continues are one grant seen through two handles. */
const continues = (a: Grant, b: Grant) => a.downgradeOf === b.grant || b.downgradeOf === a.grant;

/**
 * overlap: no write grant is believed held at an instant another grant of its name (a read or a
 * write) is believed held. A belief runs from the grant to its holder's last live check of its
 * signal (a write's or a read's), as the lock's overlap and the semaphore's over-limit draw it:
 * a holder acts on its belief only where it checks it, a lost grant is no holder after the last
 * check that found it live, and a holder frozen since its grant is believed only up to its last
 * live check before the freeze. Two intervals meet iff one starts inside the other, so checking at
 * grant instants suffices. Reads beside reads are what the lock is for: never a violation.
 */
export function checkReadWriteOverlap(events: readonly TortureEvent[]): Violation[] {
  const checks: LiveCheck[] = events.filter(
    (e): e is Extract<TortureEvent, { type: 'write' | 'read' }> => e.type === 'write' || e.type === 'read',
  );
  const faults = events.filter((e): e is Fault => e.type === 'fault');
  const believed = believedIntervals(rwGrants(events), checks, faults).map((b) => ({
    ...b,
    key: b.grant.key,
  }));
  const out: Violation[] = [];
  for (const [key, list] of byKey(believed)) {
    list.forEach((a, i) => {
      const at = a.grant.t;
      for (const [j, b] of list.entries()) {
        if (j === i || !heldAcross(b, at, j < i)) continue;
        if (a.grant.kind !== 'write' && b.grant.kind !== 'write') continue; // readers share
        if (continues(a.grant, b.grant)) continue;
        out.push({
          rule: 'overlap',
          message: `${key}: ${a.grant.kind} ${a.grant.grant} (token ${a.grant.token}) granted while ${b.grant.kind} ${b.grant.grant} (token ${b.grant.token}) was believed held`,
          events: [b.grant, a.grant],
        });
      }
    });
  }
  return out;
}

/** Whether `b` is believed held at instant `at` (granted at the same instant: once per pair). */
function heldAcross(b: Believed, at: number, earlierInList: boolean): boolean {
  if (b.grant.t === at) return earlierInList;
  return b.grant.t < at && at < b.end;
}

/**
 * tokens: per name, a token is granted once, except that a downgrade's read carries the token of
 * the write it continues (exactly that one); and a write's token is greater than every token that
 * reached a holder before the write did, reads' included (a storage fencing with `<=` then rejects
 * every older writer). A write handed out already lost is no holder (born-lost reports it): its
 * order is not judged. Reads granted together may reach their holders in either order, so reads
 * are not held to "rise in arrival order".
 */
export function checkReadWriteTokens(events: readonly TortureEvent[]): Violation[] {
  const out: Violation[] = [];
  for (const [key, list] of byKey(rwGrants(events))) {
    const byId = new Map(list.map((g) => [g.grant, g]));
    const seen = new Map<string, Grant>();
    let highest: Grant | undefined;
    for (const g of list) {
      if (g.downgradeOf !== undefined) {
        const write = byId.get(g.downgradeOf);
        if (write?.token !== g.token) {
          out.push({
            rule: 'tokens',
            message: `${key}: read ${g.grant} continues write ${g.downgradeOf} but carries token ${g.token}, not ${write?.token ?? 'a token of that write'}`,
            events: write ? [write, g] : [g],
          });
        }
      } else {
        const other = seen.get(g.token);
        if (other)
          out.push({ rule: 'tokens', message: `${key}: token ${g.token} granted twice`, events: [other, g] });
        seen.set(g.token, g);
        const twice = other !== undefined;
        if (
          g.kind === 'write' &&
          !g.abortedAtGrant &&
          !twice &&
          highest &&
          BigInt(highest.token) >= BigInt(g.token)
        ) {
          out.push({
            rule: 'tokens',
            message: `${key}: write ${g.grant} got token ${g.token}, not above ${highest.kind} ${highest.grant}'s ${highest.token} granted before it`,
            events: [highest, g],
          });
        }
      }
      if (!highest || BigInt(g.token) > BigInt(highest.token)) highest = g;
    }
  }
  return out;
}
