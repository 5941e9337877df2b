/**
 * One look at the names a dashboard shows: the held names `provider.list(prefix)` returns (locks,
 * read-write locks, and elections that are locks under the same names), plus the semaphores and
 * elections named on the command line (list() does not enumerate those). Each row is read with the
 * provider's own inspect calls, so every backend call keeps the provider's callTimeoutMs; the whole
 * look is bounded by the caller's deadline as well.
 */
import { createElection } from '../../election/lock-election.js';
import { NotImplementedError } from '../../errors.js';
import type { HolderInfo, LockProvider } from '../../types.js';
import { inspectRow } from '../commands/admin.js';

/** What kind of primitive a name is, as far as the dashboard can tell. */
export type NameKind = 'lock' | 'read-write' | 'semaphore' | 'election';

/** One holder of a name: the lock's holder, a reader or the writer, a permit grant, the leader. */
export interface HolderRow {
  owner: string | null;
  /** The fencing token (the term, for an election), as a decimal string. */
  token: string;
  since: string | null;
  ageMs: number | null;
  expiresAt: string | null;
  /** Milliseconds until the lease runs out (negative: overdue), where the backend has leases. */
  expiresInMs: number | null;
  /** A read-write lock's holder: 'read' or 'write'. */
  mode?: 'read' | 'write';
  /** A semaphore grant: how many permits it takes. */
  permits?: number;
}

/** One row of the names view: GET /api/names returns these. */
export interface NameRow {
  name: string;
  kind: NameKind;
  holders: HolderRow[];
  waiters: number;
  /** Semaphores: permits held and the limit. */
  permits?: { used: number; limit: number };
  /** Elections: who leads and in which term (null: nobody). */
  leader?: { value: string; term: string } | null;
  /** Set while a lock-delay keeps the name from everybody. */
  delayedUntil?: string;
}

/** The names a dashboard watches beyond those list() returns. */
export interface WatchedNames {
  prefix: string;
  /** Semaphore name → its limit (the limit every process uses). */
  semaphores: ReadonlyMap<string, number>;
  elections: readonly string[];
}

/** All rows, sorted by name. Throws what the provider throws (BackendUnavailableError on an outage). */
export async function takeSnapshot(
  provider: LockProvider,
  watched: WatchedNames,
  now: () => number = Date.now,
): Promise<NameRow[]> {
  if (!provider.list) throw new NotImplementedError(`listing names on the ${provider.backend} provider`);
  const listed = await provider.list(watched.prefix);
  const elections = new Set(watched.elections.filter((name) => name.startsWith(watched.prefix)));
  const semaphores = [...watched.semaphores].filter(([name]) => name.startsWith(watched.prefix));
  const taken = new Set([...elections, ...semaphores.map(([name]) => name)]);
  const reads: Array<() => Promise<NameRow>> = [
    ...[...elections].map((name) => () => electionRow(provider, name, now())),
    ...semaphores.map(
      ([name, limit]) =>
        () =>
          semaphoreRow(provider, name, limit, now()),
    ),
    ...[...new Set(listed)]
      .filter((name) => !taken.has(name))
      .map((name) => () => lockRow(provider, name, now())),
  ];
  const rows = await inTurns(reads, PARALLEL_READS);
  return rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** How many names are read at once: a look at many names is not one round trip per name in a row. */
const PARALLEL_READS = 16;

/** Runs the reads, at most `width` at a time; fails with the first read that fails. */
async function inTurns<T>(reads: Array<() => Promise<T>>, width: number): Promise<T[]> {
  const results: T[] = new Array(reads.length);
  let next = 0;
  const lane = async () => {
    while (next < reads.length) {
      const index = next++;
      results[index] = await (reads[index] as () => Promise<T>)();
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, reads.length) }, lane));
  return results;
}

/** The HolderInfo fields as a row shows them, through inspect's own row (admin.ts). */
export function holderRow(name: string, holder: HolderInfo, now: number): HolderRow {
  const row = inspectRow(name, { key: name, holder, waiters: 0 }, now);
  return {
    owner: row.holder === '' ? null : row.holder,
    token: row.token as string,
    since: row.since,
    ageMs: row.ageMs,
    expiresAt: row.expiresAt,
    expiresInMs: holder.expiresAt ? holder.expiresAt.getTime() - now : null,
  };
}

/** A listed name: its lock's holder, else its read-write lock's holders (the name is held by one). */
async function lockRow(provider: LockProvider, name: string, now: number): Promise<NameRow> {
  const info = await provider.inspect(name);
  if (!info?.holder && provider.readWriteLock) {
    const rw = await provider.readWriteLock(name).inspect().catch(readWriteMissing);
    if (rw && (rw.writer || rw.readers.length > 0)) {
      const holders = rw.writer
        ? [{ ...holderRow(name, rw.writer, now), mode: 'write' as const }]
        : rw.readers.map((reader) => ({ ...holderRow(name, reader, now), mode: 'read' as const }));
      return { name, kind: 'read-write', holders, waiters: rw.waiters };
    }
  }
  return {
    name,
    kind: 'lock',
    holders: info?.holder ? [holderRow(name, info.holder, now)] : [],
    waiters: info?.waiters ?? 0,
    ...(info?.delayedUntil ? { delayedUntil: info.delayedUntil.toISOString() } : {}),
  };
}

/** A backend without read-write locks (NotImplementedError) shows the name as a lock. */
function readWriteMissing(error: unknown): null {
  if (error instanceof NotImplementedError) return null;
  throw error;
}

async function semaphoreRow(
  provider: LockProvider,
  name: string,
  limit: number,
  now: number,
): Promise<NameRow> {
  if (!provider.semaphore) throw new NotImplementedError(`semaphores on the ${provider.backend} provider`);
  const info = await provider.semaphore(name, { limit }).inspect();
  const holders = info.holders.map((holder) => ({
    ...holderRow(name, holder, now),
    permits: holder.permits,
  }));
  return {
    name,
    kind: 'semaphore',
    holders,
    waiters: info.waiters,
    permits: { used: info.holders.reduce((sum, holder) => sum + holder.permits, 0), limit: info.limit },
  };
}

/** An election: its leader and term; where the election is a lock, the lock's holder details too. */
async function electionRow(provider: LockProvider, name: string, now: number): Promise<NameRow> {
  const [leader, info] = await Promise.all([createElection(provider, name).leader(), provider.inspect(name)]);
  const holder = info?.holder;
  const holders =
    leader === null
      ? []
      : holder && holder.fencingToken === leader.term
        ? [holderRow(name, holder, now)]
        : [{ ...EMPTY_HOLDER, owner: leader.value, token: leader.term.toString() }];
  return {
    name,
    kind: 'election',
    holders,
    waiters: info?.waiters ?? 0,
    leader: leader === null ? null : { value: leader.value, term: leader.term.toString() },
  };
}

const EMPTY_HOLDER: HolderRow = {
  owner: null,
  token: '',
  since: null,
  ageMs: null,
  expiresAt: null,
  expiresInMs: null,
};
