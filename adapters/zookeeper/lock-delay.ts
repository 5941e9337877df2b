import { sleepUnlessWoken } from '../../src/backoff.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { type ZkSession, zkCode } from './client.js';
import { unavailable, type ZkQueued } from './mutex.js';
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
  /** Whether the last listing of the queue showed a marker (no read when it did not). */
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
