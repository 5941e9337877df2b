import type { ZkClient } from './wire/client.js';

/**
 * The heartbeat's request: a multi holding only check('/'). A read (exists, getData) is answered by
 * whichever server the client is connected to, and a follower cut off from the quorum keeps
 * answering reads for up to syncLimit × tickTime while the leader expires our session. A multi is a
 * write: the follower forwards it to the leader, which commits it with a quorum, so its answer
 * proves that the ensemble still knew the session when it was sent.
 */
export async function confirmThroughLeader(client: ZkClient, timeoutMs: number): Promise<void> {
  await client.multi([{ op: 'check', path: '/', version: -1 }], { timeoutMs });
}

/**
 * The server tick the margin assumes: serverTickMs, but at most half the granted timeout (the
 * server grants at least 2 ticks, its default minSessionTimeout). The client cannot learn tickTime.
 */
export function effectiveTickMs(grantedTimeoutMs: number, serverTickMs: number): number {
  return Math.min(serverTickMs, grantedTimeoutMs / 2);
}

/**
 * How long a touch the leader is known to have applied only through a follower's report vouches
 * for the session, before the drift and round-trip margin: the session timeout less one tick.
 */
export function trustedSpanMs(grantedTimeoutMs: number, serverTickMs: number): number {
  return grantedTimeoutMs - effectiveTickMs(grantedTimeoutMs, serverTickMs);
}

/**
 * Which earlier moment an answered heartbeat proves the leader's expiry clock started from.
 *
 * The leader expires a session `timeout` after the last touch it applied. A client's request touches
 * the session on the server it reaches; a follower passes its touches on to the leader only in its
 * answers to the leader's pings (twice per tick), and a request it forwards (our multi) touches
 * nothing on the leader. So the touch of a heartbeat may never reach the leader: the follower can
 * stop right after answering it, and the leader then counts from an older touch. What an answer
 * does prove: the follower ran, on the same connection, until it forwarded this heartbeat, so it
 * had answered the leader's pings in between and passed on the touch of any request of ours it
 * received at least a tick earlier (the connection keeps order). Hence the anchor is the send time
 * of the latest heartbeat answered on this connection that left at least a tick before this one,
 * and the session is trusted until `anchor + timeout × (1 − drift) − rtt`: never later than
 * `sent + (timeout − tick) × (1 − drift) − rtt`. A (re)connect handshake is different: the server
 * asks the leader to validate the session, which touches it there, so its answer vouches for
 * `handshake + timeout × (1 − drift) − rtt`, as the session's creation does (the handshake's send
 * time is taken as the moment the connection before it ended, and rtt from then: both only earlier).
 */
export function provenTouch(
  answeredSends: readonly number[],
  sentAt: number,
  tickMs: number,
): number | undefined {
  let anchor: number | undefined;
  for (const at of answeredSends)
    if (at <= sentAt - tickMs && (anchor === undefined || at > anchor)) anchor = at;
  return anchor;
}

/** When the session sends its heartbeats, and how long it waits for each: see heartbeatCadence. */
export interface HeartbeatCadence {
  /** From an answer to the next heartbeat. */
  intervalMs: number;
  /** A heartbeat not answered within this on one connection gives that server up. */
  answerWithinMs: number;
  /** From a failed heartbeat to the next try. */
  retryMs: number;
}

/**
 * The heartbeat's schedule, so that a server that falls silent (paused, cut off from the quorum,
 * dead without a reset) costs the session nothing when another member answers. With span =
 * timeout − tick, heartbeats leave every span/4; an answer at t vouches (provenTouch) from an
 * anchor at most span/4 + tick earlier, so until about t + 3·span/4. Worst case, the server stops
 * right after answering: the next heartbeat leaves at t + span/4 and is given up at t + span/2;
 * the session drops that connection, the client connects to the next member, and that handshake
 * confirms the session at once (the leader validated it): a quarter of the span is left for one
 * connect. The Java client waits 2/3 of the session timeout before it gives a silent server up,
 * later than this: it does not have to tell anyone of a loss before the leader expires the session.
 */
export function heartbeatCadence(spanMs: number, callTimeoutMs: number): HeartbeatCadence {
  const quarter = spanMs / 4;
  return {
    intervalMs: quarter,
    answerWithinMs: Math.min(quarter, callTimeoutMs),
    // Soon, but not a busy loop against a server that answers every heartbeat with an error.
    retryMs: Math.max(spanMs / 20, 20),
  };
}
