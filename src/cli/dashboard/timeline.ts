/**
 * What changed between two looks at the names (snapshot.ts), as timeline entries, and the history
 * a name's detail shows (the last grants' tokens, how long grants were held). Pure: the same two
 * looks at the same time give the same entries.
 *
 * A poller sees a grant appear and disappear, not why it went. A grant gone while its lease had
 * expired is a loss ('expired'); any other disappearance is a release, which on a backend without
 * per-lock leases (etcd, ZooKeeper, PostgreSQL) also covers a holder whose session ended. A
 * force-release made through this dashboard comes from the provider's own 'force-release' event,
 * with who, why and the token, and its disappearance is not reported twice.
 */
import type { HolderRow, NameKind, NameRow } from './snapshot.js';

/** One timeline entry: GET /api/events sends these as `timeline` events. */
export interface TimelineEntry {
  /** ISO time the dashboard saw it. */
  at: string;
  name: string;
  kind: NameKind;
  type: 'grant' | 'release' | 'loss' | 'force-release' | 'elected' | 'term-ended';
  owner: string | null;
  token: string;
  /** A loss's reason; a force-release's reason as the operator gave it. */
  reason?: string;
  /** Who force-released it. */
  by?: string;
  /** How long the grant was held, where its start is known. */
  heldMs?: number;
  /** 'poll': seen by comparing two looks; 'event': the provider's event. */
  seen: 'poll' | 'event';
  /** A read-write lock's holder mode, a semaphore grant's permits. */
  mode?: 'read' | 'write';
  permits?: number;
}

/** How many grants per name the token history keeps, and hold times. */
export const HISTORY_LENGTH = 50;

/** The timeline entries that lead from `before` to `after`, seen at `now`. */
export function changes(
  before: readonly NameRow[],
  after: readonly NameRow[],
  now: number,
  forced: ReadonlySet<string> = new Set(),
): TimelineEntry[] {
  const at = new Date(now).toISOString();
  const previous = new Map(before.map((row) => [row.name, row]));
  const entries: TimelineEntry[] = [];
  const names = new Set([...before.map((row) => row.name), ...after.map((row) => row.name)]);
  for (const name of [...names].sort()) {
    const old = previous.get(name);
    const current = after.find((row) => row.name === name);
    const kind = current?.kind ?? old?.kind ?? 'lock';
    const oldTokens = new Set(old?.holders.map((holder) => holder.token));
    const newTokens = new Set(current?.holders.map((holder) => holder.token));
    for (const holder of old?.holders ?? []) {
      if (newTokens.has(holder.token) || forced.has(forcedKey(name, holder.token))) continue;
      entries.push(ended(at, name, kind, holder, now));
    }
    for (const holder of current?.holders ?? []) {
      if (oldTokens.has(holder.token)) continue;
      entries.push({
        at,
        name,
        kind,
        type: kind === 'election' ? 'elected' : 'grant',
        seen: 'poll',
        ...holderFacts(holder),
      });
    }
  }
  return entries;
}

/** The key under which a force-release made here is remembered, so its disappearance is not reported. */
export function forcedKey(name: string, token: string): string {
  return `${name}\u0000${token}`;
}

function ended(at: string, name: string, kind: NameKind, holder: HolderRow, now: number): TimelineEntry {
  const expired = holder.expiresAt !== null && Date.parse(holder.expiresAt) <= now;
  const heldMs = holder.since === null ? undefined : Math.max(0, now - Date.parse(holder.since));
  return {
    at,
    name,
    kind,
    type: expired ? 'loss' : kind === 'election' ? 'term-ended' : 'release',
    seen: 'poll',
    ...holderFacts(holder),
    ...(expired ? { reason: 'expired' } : {}),
    ...(heldMs === undefined ? {} : { heldMs }),
  };
}

function holderFacts(holder: HolderRow) {
  return {
    owner: holder.owner,
    token: holder.token,
    ...(holder.mode ? { mode: holder.mode } : {}),
    ...(holder.permits ? { permits: holder.permits } : {}),
  };
}

/** A name's history for its detail view: the last grants' tokens and the hold times seen. */
export interface NameHistory {
  grants: { token: string; at: string }[];
  holdTimesMs: number[];
}

/** How many names' histories are kept; the name seen first goes first. */
export const MAX_NAMES = 10_000;

/** The last entries, the last HISTORY_LENGTH grants and hold times per name. */
export class Timeline {
  readonly #entries: TimelineEntry[] = [];
  readonly #histories = new Map<string, NameHistory>();

  constructor(readonly capacity = 500) {}

  add(entry: TimelineEntry): void {
    this.#entries.push(entry);
    if (this.#entries.length > this.capacity) this.#entries.shift();
    let history = this.#histories.get(entry.name);
    if (!history) {
      history = { grants: [], holdTimesMs: [] };
      this.#histories.set(entry.name, history);
      // Names that come and go (one per job, say) must not grow the map without bound.
      if (this.#histories.size > MAX_NAMES)
        this.#histories.delete(this.#histories.keys().next().value as string);
    }
    if (entry.type === 'grant' || entry.type === 'elected') {
      pushBounded(history.grants, { token: entry.token, at: entry.at });
    } else if (entry.heldMs !== undefined) {
      pushBounded(history.holdTimesMs, entry.heldMs);
    }
  }

  /** The kept entries, oldest first. */
  entries(): readonly TimelineEntry[] {
    return this.#entries;
  }

  history(name: string): NameHistory {
    const history = this.#histories.get(name);
    return { grants: [...(history?.grants ?? [])], holdTimesMs: [...(history?.holdTimesMs ?? [])] };
  }
}

function pushBounded<T>(list: T[], item: T): void {
  list.push(item);
  if (list.length > HISTORY_LENGTH) list.shift();
}
