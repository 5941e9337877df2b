import type { OwnedLock } from '../../src/ownership.js';
import { sessionGrant } from '../../src/session-grant.js';
import type { ZkSession } from './client.js';
import { releaseGrantWithMarker, releaseWithMarker } from './lock-delay.js';
import { leaveQueue, protectedCreate, waitForTurn, type ZkQueueCall, type ZkQueued } from './mutex.js';
import { OwnNodeWatch } from './node-watch.js';

/** A queued node of ours whose turn came: its czxid is the fencing token. */
export interface ZkTurn {
  queued: ZkQueued;
  token: bigint;
  /** The watch on our node, armed while we waited or soon after the grant. */
  watch: OwnNodeWatch;
}

/**
 * One request's node, from its creation to its grant or its removal, for locks and read-write
 * locks alike: the node is created once (protectedCreate) and waits by `call`'s rule (waitForTurn).
 * Resolves with the turn, or null when `wait` is false and ours is blocked. A node that is not
 * granted goes: the session retries its delete until confirmed, or its end removes the node.
 * `atHead`, when given, runs once ours heads the queue (a lock-delay to wait out): false refuses the
 * turn as a blocked one is refused.
 */
export async function takeTurn(
  call: ZkQueueCall,
  wait: boolean,
  cancel: AbortSignal,
  atHead?: (queued: ZkQueued) => Promise<boolean>,
): Promise<ZkTurn | null> {
  const { session } = call;
  const queued = await protectedCreate(call, cancel);
  const watch = new OwnNodeWatch(session, queued.path);
  try {
    const stat = await waitForTurn(call, queued, wait, cancel, watch);
    if (stat && (!atHead || (await atHead(queued)))) return { queued, token: stat.czxid, watch };
  } catch (error) {
    await leaveQueue(session, [queued.path], cancel); // timed out, aborted or cut off
    throw error;
  }
  await session.removeWithin(queued.path, { signal: cancel });
  return null;
}

/** What a grant of a turn is told: the name it holds, its request's token, what to do once released. */
export interface TurnGrant {
  key: string;
  ownerToken: string;
  /** After the node is deleted on release (e.g. delete the folder later if it stays empty). */
  released: () => void;
  /** The name's folder when the grant wrote a lock-delay marker: a clean release deletes it too. */
  markerIn?: string;
  /** The path of the grant's own marker (a read-write grant's): a clean release deletes it too. */
  grantMarker?: string;
  /**
   * The provider's close signal: a release once it aborted sends no delete (a grant without a
   * marker), since closing the session removes all its nodes in one call.
   */
  closing?: AbortSignal;
}

/**
 * The grant of a turn: trusted while the session lives, lost with it ('session-lost') or when the
 * node is deleted behind our back ('revoked', by the node's watch); its release deletes the node.
 */
export function holdTurn(session: ZkSession, turn: ZkTurn, grant: TurnGrant): OwnedLock {
  const lock = sessionGrant(
    session,
    { key: grant.key, fencingToken: turn.token, ownerToken: grant.ownerToken },
    async () => {
      if (!session.alive) return; // the session's end removed the node
      const { markerIn, grantMarker } = grant;
      // Closing: a delete per grant (100,000 held) would queue the session's close behind them.
      if (grant.closing?.aborted && !markerIn && !grantMarker) return;
      // Unanswered, the node goes alone: the next holder waits a delay it need not (never shorter).
      const releasing = markerIn
        ? releaseWithMarker(session, markerIn, turn.queued.path)
        : grantMarker
          ? releaseGrantWithMarker(session, [turn.queued.path], grantMarker)
          : undefined;
      const both = releasing
        ? await releasing.then(
            () => true,
            () => false,
          )
        : false;
      if (!both) await session.removeWithin(turn.queued.path); // unconfirmed: the session retries it
      grant.released();
    },
  );
  lock.onEnd(session.whenLost((reason) => lock.lose(reason)));
  lock.onEnd(turn.watch.whenDeleted(() => lock.lose('revoked'))); // deleted behind our back
  // As with Curator, a grant released before the next turn of the event loop costs no watch call.
  turn.watch.armSoon();
  return lock;
}
