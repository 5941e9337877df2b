import { sleepUnlessWoken } from '../../src/backoff.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { type ZkSession, zkCode } from './client.js';
import type { ZkQueued } from './mutex.js';
import { unavailable } from './unavailable.js';
import { type ACL, CreateMode, type Stat } from './wire/ops.js';

/**
 * Lock-delay on ZooKeeper: one PERSISTENT marker node per name, `<folder>/MARKER_NAME`, beside the
 * lock nodes. Its name has the form of a queue node's (`_c_<uuid>-`, which no lock name may have, so
 * no name's folder is ever the marker), but of no queue kind: fencekit's queueOrder skips it, and
 * Curator, which sorts every child of the folder by the text after "lock-" (or "latch-"), sorts it
 * after every sequence number, so it never heads a queue nor is watched as a predecessor.
 *
 * A grant that asks for a delay creates it, guarded by its own node (`<holder node> <delay ms>`); a
 * clean release deletes both in one multi. Once the holder's node is gone without that (session
 * expired, force-release), the marker says so: the queue's head (any node ahead of it is gone) and a
 * force-release stamp it (setData, data `… lost`). The stamp's answer comes after the loss, so a
 * delay counted from it on our monotonic clock is never shorter than asked. The head waits the delay
 * (bounded by its request's signal), then deletes the marker, guarded by the version it stamped, and
 * is granted. A head that finds the marker again (its wait was cut short, another head came after
 * it) stamps it again and waits the whole delay again: longer, never shorter.
 */

/** The marker's name in the name's folder (see above). */
export const MARKER_NAME = '_c_00000000-0000-0000-0000-000000000000-lockdelay';

export interface Marker {
  /** The name of the lock node whose grant wrote it. */
  holder: string;
  delayMs: number;
  /** Stamped: its holder was found gone. */
  lost: boolean;
  stat: Stat;
}

export function markerPath(parent: string): string {
  return `${parent}/${MARKER_NAME}`;
}

function markerData(holder: string, delayMs: number, lost = false): Buffer {
  return Buffer.from(`${holder} ${delayMs}${lost ? ' lost' : ''}`);
}

/** The marker as stored; unreadable data counts as the longest delay of a lost holder. */
function parseMarker(data: Buffer, stat: Stat): Marker {
  const m = /^(\S+) (\d+)( lost)?$/.exec(data.toString('utf8'));
  if (!m) return { holder: '', delayMs: 60_000, lost: true, stat };
  return { holder: m[1] as string, delayMs: Number(m[2]), lost: m[3] !== undefined, stat };
}

/** The marker, or undefined when there is none. */
export async function readMarker(
  session: ZkSession,
  parent: string,
  signal?: AbortSignal,
): Promise<Marker | undefined> {
  try {
    const { data, stat } = await session.client.getData(markerPath(parent), signal ? { signal } : {});
    return parseMarker(data, stat);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (zkCode(error) === 'NO_NODE') return undefined;
    throw unavailable('reading the lock-delay marker failed', error);
  }
}

/**
 * Stamps a lost holder's marker (guarded by the version read): resolves with its new Stat once the
 * server answered, or undefined when the marker changed or went meanwhile (read it again).
 */
export async function stampLost(
  session: ZkSession,
  parent: string,
  marker: Marker,
  signal?: AbortSignal,
): Promise<Stat | undefined> {
  try {
    const data = markerData(marker.holder, marker.delayMs, true);
    return await session.client.setData(
      markerPath(parent),
      data,
      marker.stat.version,
      signal ? { signal } : {},
    );
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    const code = zkCode(error);
    if (code === 'NO_NODE' || code === 'BAD_VERSION') return undefined;
    throw unavailable('starting the lock-delay failed', error);
  }
}

export interface AtHead {
  session: ZkSession;
  parent: string;
  acl: readonly ACL[];
  /** The delay our grant asks for (0: it writes no marker). */
  delayMs: number;
  /**
   * Whether the last listing showed a marker (no read when it did not); false too for a waiter next
   * in line that knew the marker absent when the head went (mutex.ts).
   */
  markerListed: boolean;
  wait: boolean;
  signal: AbortSignal;
}

/**
 * Called when our node heads the queue, before the grant: waits out a lost holder's delay, then, for
 * a grant that asks for a delay, writes its own marker guarded by our node. Resolves true when we may
 * be granted, false when `wait` is false and a delay runs (it has been started). No call at all when
 * the listing showed no marker and the grant asks for no delay.
 */
export async function clearLockDelay(queued: ZkQueued, o: AtHead): Promise<boolean> {
  const { session, parent, signal } = o;
  let mayExist = o.markerListed;
  for (;;) {
    signal.throwIfAborted();
    const marker = mayExist ? await readMarker(session, parent, signal) : undefined;
    mayExist = true;
    if (marker?.holder === queued.name) return true; // ours: written by this grant already
    if (marker === undefined) {
      if (o.delayMs === 0) return true;
      if (await createOwnMarker(queued, o)) return true;
      continue; // a marker came (or our create's answer was lost): look at it
    }
    // We head the queue, so the node the marker names is gone without a clean release: lost.
    const stamped = await stampLost(session, parent, marker, signal);
    if (!stamped) continue;
    if (!o.wait) return false;
    await waitOut(session, marker.delayMs, signal);
    // Ours to end: delete (or, asking for a delay ourselves, replace) the marker we stamped.
    if (await replaceMarker(queued, o, stamped.version)) return true;
  }
}

/** Sleeps the delay, ending early (rejecting) on the request's signal or the session's loss. */
async function waitOut(session: ZkSession, delayMs: number, signal: AbortSignal): Promise<void> {
  const sleep = sleepUnlessWoken(delayMs, signal);
  const unsubscribe = session.whenLost(() => sleep.wake());
  try {
    if ((await sleep.done) === 'woken') {
      throw new BackendUnavailableError('zookeeper: the session was lost during a lock-delay');
    }
  } finally {
    unsubscribe();
  }
}

/** Our marker, created only while our node exists. false: a marker exists already, or our node is gone. */
async function createOwnMarker(queued: ZkQueued, o: AtHead): Promise<boolean> {
  try {
    await o.session.client.multi(
      [
        { op: 'check', path: queued.path, version: -1 },
        {
          op: 'create',
          path: markerPath(o.parent),
          data: markerData(queued.name, o.delayMs),
          acl: o.acl,
          mode: CreateMode.PERSISTENT,
        },
      ],
      { signal: o.signal },
    );
    return true;
  } catch (error) {
    if (o.signal.aborted) throw o.signal.reason;
    const code = zkCode(error);
    if (code === 'NODE_EXISTS') return false;
    if (code === 'NO_NODE') {
      throw new BackendUnavailableError('zookeeper: our queue node is gone (session expired)');
    }
    throw unavailable('writing the lock-delay marker failed', error);
  }
}

/** Ends a delay we waited out: the stamped marker goes (replaced by ours with a delay). false: it changed. */
async function replaceMarker(queued: ZkQueued, o: AtHead, version: number): Promise<boolean> {
  const path = markerPath(o.parent);
  try {
    if (o.delayMs === 0) {
      await o.session.client.delete(path, version, { signal: o.signal });
    } else {
      await o.session.client.multi(
        [
          { op: 'check', path: queued.path, version: -1 },
          { op: 'setData', path, data: markerData(queued.name, o.delayMs), version },
        ],
        { signal: o.signal },
      );
    }
    return true;
  } catch (error) {
    if (o.signal.aborted) throw o.signal.reason;
    const code = zkCode(error);
    if (code === 'BAD_VERSION') return false;
    if (code === 'NO_NODE') return false; // the marker went (look again), or our node did (found next)
    throw unavailable('ending the lock-delay failed', error);
  }
}

/**
 * A clean release of a grant that wrote a marker: its node and the marker in one multi. Rejects
 * when it did not commit; the caller then deletes the node alone (the next holder waits a delay it
 * did not need: longer, never shorter).
 */
export async function releaseWithMarker(session: ZkSession, parent: string, node: string): Promise<void> {
  await session.client.multi([
    { op: 'delete', path: node, version: -1 },
    { op: 'delete', path: markerPath(parent), version: -1 },
  ]);
}

/**
 * After a force-release deleted `removed` (a node's name): starts its lock-delay at once, if its
 * grant wrote a marker. Best effort: the next head stamps it anyway.
 */
export async function stampAfterRemoval(session: ZkSession, parent: string, removed: string): Promise<void> {
  const marker = await readMarker(session, parent);
  if (marker?.holder === removed) await stampLost(session, parent, marker);
}

/**
 * When the delay a marker shows ends at the earliest, for inspect(): none while the node it names
 * heads the queue (it holds). A stamped marker ends its delay mtime + delay by the server's clock;
 * a lost holder nobody has found yet waits the whole delay from when it is found, so not before now.
 * `head` is the node heading the queue now, if any.
 */
export function delayedUntil(marker: Marker | undefined, head: string | undefined): Date | undefined {
  if (!marker || marker.holder === head) return undefined;
  if (!marker.lost) return new Date(Date.now() + marker.delayMs);
  const until = Number(marker.stat.mtime) + marker.delayMs;
  // Past by the server's clock: over, unless a head still waits it out by ours.
  if (until <= Date.now() && head === undefined) return undefined;
  return new Date(Math.max(until, Date.now()));
}

/*
 * Lock-delay of semaphore permits and read-write grants: several grants hold at once, so each grant
 * that asks for a delay writes a marker of its own, a PERSISTENT node `_c_<uuid>-<kind>` where uuid
 * is that of the grant's node(s) (`_c_<uuid>-lease-…`, `_c_<uuid>-__READ__…`): its holder is alive
 * while a node with that uuid exists. The kinds (permitdelay, readdelay, writedelay) contain no
 * Curator lock name, so queueOrder skips them and Curator sorts them after every sequence number,
 * as MARKER_NAME above. Created (multi: check our node, create) before the grant is handed out;
 * deleted with the grant's node(s) in one multi by a clean release. So a marker listed while its
 * holder's node is not (in the same listing, or in one answered after the marker's) belongs to a
 * lost grant: whoever finds it stamps it (setData guarded by the version read, `lost: true`) unless
 * it is stamped already, and counts the delay from the stamp's mtime by the server's clock (see
 * ServerClock); whoever finds it over deletes it, guarded by the stamped version (a stamped marker
 * never changes again). A marker left behind by a release that failed is so a delay, never a lockout.
 */

/** The kind of a grant's marker: a semaphore grant's permits, a read's, a write's. */
export type GrantMarkerKind = 'permitdelay' | 'readdelay' | 'writedelay';

const GRANT_MARKER = /^_c_([0-9a-f-]{36})-(permitdelay|readdelay|writedelay)$/;
const NODE_UUID = /^_c_([0-9a-f-]{36})-/;

/** The marker's name of a grant whose node(s) carry `uuid`. */
export function grantMarkerName(uuid: string, kind: GrantMarkerKind): string {
  return `_c_${uuid}-${kind}`;
}

/** The uuid of a protected node's name (`_c_<uuid>-…`), or undefined. */
export function nodeUuid(name: string): string | undefined {
  return NODE_UUID.exec(name)?.[1];
}

export interface ListedMarker {
  name: string;
  /** The uuid of its holder's node(s). */
  uuid: string;
  kind: GrantMarkerKind;
}

/** The grant markers of the given kinds among a folder's children (never the lock's MARKER_NAME). */
export function listedMarkers(
  children: readonly string[],
  kinds: readonly GrantMarkerKind[],
): ListedMarker[] {
  const found: ListedMarker[] = [];
  for (const name of children) {
    const m = GRANT_MARKER.exec(name);
    if (m && kinds.includes(m[2] as GrantMarkerKind)) {
      found.push({ name, uuid: m[1] as string, kind: m[2] as GrantMarkerKind });
    }
  }
  return found;
}

export interface GrantMarker extends ListedMarker {
  delayMs: number;
  /** Permits of a semaphore grant; undefined when unreadable (count them all). */
  permits: number | undefined;
  lost: boolean;
  stat: Stat;
}

function grantMarkerData(delayMs: number, permits: number | undefined, lost: boolean): Buffer {
  return Buffer.from(JSON.stringify({ delayMs, ...(permits === undefined ? {} : { permits }), lost }));
}

/** As stored; data that does not read counts as the longest delay of a lost grant of every permit. */
function parseGrantMarker(listed: ListedMarker, data: Buffer, stat: Stat): GrantMarker {
  let parsed: { delayMs?: unknown; permits?: unknown; lost?: unknown } = {};
  try {
    const value: unknown = JSON.parse(data.toString('utf8'));
    if (typeof value === 'object' && value !== null) parsed = value;
  } catch {
    // unreadable: the defaults below
  }
  const { delayMs, permits, lost } = parsed;
  const validDelay =
    Number.isSafeInteger(delayMs) && (delayMs as number) >= 0 && (delayMs as number) <= 60_000;
  return {
    ...listed,
    delayMs: validDelay ? (delayMs as number) : 60_000,
    permits: Number.isSafeInteger(permits) && (permits as number) > 0 ? (permits as number) : undefined,
    lost: validDelay ? lost === true : true,
    stat,
  };
}

/**
 * The server's clock as this process knows it: readings of a write's Stat time (ctime of a node we
 * created, mtime of a stamp) with our monotonic time when its answer came. The server was at the
 * reading no later than the answer came, so `reading + (now - answered)` never runs ahead of it
 * (while the clocks run at one rate): a time by the server's clock is reached, by this count, no
 * sooner than on the server.
 */
export class ServerClock {
  readonly #readings: Array<{ server: number; local: number }> = [];

  note(server: bigint, local = performance.now()): void {
    this.#readings.push({ server: Number(server), local });
  }

  get known(): boolean {
    return this.#readings.length > 0;
  }

  /** Our monotonic time when the server's clock reaches `server` at the latest (by every reading). */
  localWhen(server: number): number {
    let when = Number.POSITIVE_INFINITY;
    for (const r of this.#readings) {
      const at = r.local + (server - r.server);
      when = when === Number.POSITIVE_INFINITY ? at : Math.max(when, at);
    }
    return when;
  }
}

/** A lost grant whose delay runs until `endsAt` (our monotonic clock). */
export interface RunningDelay {
  marker: GrantMarker;
  endsAt: number;
}

export interface DelayScan {
  session: ZkSession;
  /** The folder of the markers. */
  parent: string;
  /** Markers of lost grants: listed while their holder's node was not (see above). */
  lost: readonly ListedMarker[];
  clock: ServerClock;
  signal: AbortSignal;
}

/**
 * Reads the lost grants' markers: stamps those not stamped yet, deletes those whose delay is over,
 * and answers the others. Every call carries the request's signal.
 */
export async function runningDelays(o: DelayScan): Promise<RunningDelay[]> {
  const { session, parent, clock, signal } = o;
  const running: RunningDelay[] = [];
  for (const listed of o.lost) {
    const path = `${parent}/${listed.name}`;
    let marker: GrantMarker | undefined;
    for (let attempt = 0; attempt < 3 && marker === undefined; attempt++) {
      const read = await readGrantMarker(session, parent, listed, signal);
      if (!read) break; // deleted meanwhile: released or over
      if (read.lost) {
        marker = read;
        break;
      }
      try {
        const data = grantMarkerData(read.delayMs, read.permits, true);
        const stat = await session.client.setData(path, data, read.stat.version, { signal });
        clock.note(stat.mtime);
        marker = { ...read, lost: true, stat };
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        const code = zkCode(error);
        if (code === 'NO_NODE') break;
        if (code !== 'BAD_VERSION') throw unavailable('starting the lock-delay failed', error);
        // stamped by another meanwhile: read it again
      }
    }
    if (!marker) continue;
    // Without a reading of the server's clock (callers give one): the whole delay from now.
    const endsAt = clock.known
      ? clock.localWhen(Number(marker.stat.mtime) + marker.delayMs)
      : performance.now() + marker.delayMs;
    if (endsAt > performance.now()) {
      running.push({ marker, endsAt });
      continue;
    }
    try {
      await session.client.delete(path, marker.stat.version, { signal });
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      const code = zkCode(error);
      if (code !== 'NO_NODE' && code !== 'BAD_VERSION')
        throw unavailable('ending the lock-delay failed', error);
    }
  }
  return running;
}

async function readGrantMarker(
  session: ZkSession,
  parent: string,
  listed: ListedMarker,
  signal?: AbortSignal,
): Promise<GrantMarker | undefined> {
  try {
    const { data, stat } = await session.client.getData(`${parent}/${listed.name}`, signal ? { signal } : {});
    return parseGrantMarker(listed, data, stat);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (zkCode(error) === 'NO_NODE') return undefined;
    throw unavailable('reading a lock-delay marker failed', error);
  }
}

/**
 * For inspect(): the lost grants' delays still running, with when each ends by the server's clock
 * (a marker nobody has stamped yet is delayed from when it is found, so not before now). Reads only.
 */
export async function shownDelays(
  session: ZkSession,
  parent: string,
  lost: readonly ListedMarker[],
  signal: AbortSignal,
): Promise<Array<{ marker: GrantMarker; until: Date }>> {
  const shown: Array<{ marker: GrantMarker; until: Date }> = [];
  for (const listed of lost) {
    const marker = await readGrantMarker(session, parent, listed, signal);
    if (!marker) continue;
    const now = Date.now();
    const until = marker.lost ? Number(marker.stat.mtime) + marker.delayMs : now + marker.delayMs;
    if (until > now) shown.push({ marker, until: new Date(until) });
  }
  return shown;
}

/**
 * Waits until every running delay has ended (our monotonic clock), ending early (rejecting) on the
 * request's signal or the session's loss.
 */
export async function waitForDelays(
  session: ZkSession,
  running: readonly RunningDelay[],
  signal: AbortSignal,
): Promise<void> {
  const endsAt = Math.max(...running.map((d) => d.endsAt));
  await waitOut(session, Math.max(0, Math.ceil(endsAt - performance.now())), signal);
}

/**
 * Our grant's marker, created only while `node` (our grant's node) exists. Rejects with
 * BackendUnavailableError when the node is gone.
 */
export async function createGrantMarker(
  session: ZkSession,
  o: { parent: string; name: string; node: string; acl: readonly ACL[]; delayMs: number; permits?: number },
  signal: AbortSignal,
): Promise<void> {
  try {
    await session.client.multi(
      [
        { op: 'check', path: o.node, version: -1 },
        {
          op: 'create',
          path: `${o.parent}/${o.name}`,
          data: grantMarkerData(o.delayMs, o.permits, false),
          acl: o.acl,
          mode: CreateMode.PERSISTENT,
        },
      ],
      { signal },
    );
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    const code = zkCode(error);
    if (code === 'NODE_EXISTS') return; // ours, from an answer lost on the way (the uuid is the grant's)
    if (code === 'NO_NODE') {
      throw new BackendUnavailableError('zookeeper: our grant node is gone (session expired)');
    }
    throw unavailable('writing the lock-delay marker failed', error);
  }
}

/**
 * A clean release of a grant that wrote a marker: its node(s) and the marker in one multi. Rejects
 * when it did not commit; the caller then deletes the nodes alone (the marker then turns into a
 * delay nobody needed: longer, never shorter, and removed by whoever finds it over).
 */
export async function releaseGrantWithMarker(
  session: ZkSession,
  nodes: readonly string[],
  marker: string,
): Promise<void> {
  await session.client.multi([
    ...nodes.map((path) => ({ op: 'delete' as const, path, version: -1 })),
    { op: 'delete', path: marker, version: -1 },
  ]);
}
