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
 * How long an answered heartbeat vouches for the session, before the drift and round-trip margin:
 * the session timeout less one server tick. The leader learns that a session on a follower is alive
 * only from the follower's reports, sent once per tick, so its expiry clock may have started up to
 * a tick before our request was sent. The client cannot learn tickTime, hence serverTickMs; but the
 * server grants at least 2 ticks (its default minSessionTimeout), so the tick is at most half the
 * granted timeout.
 */
export function trustedSpanMs(grantedTimeoutMs: number, serverTickMs: number): number {
  return grantedTimeoutMs - Math.min(serverTickMs, grantedTimeoutMs / 2);
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
 * The heartbeat's schedule within the span an answer vouches for (trustedSpanMs), so that a server
 * that falls silent (paused, partitioned from the quorum, dead without a reset) costs the session
 * nothing when another member answers. Worst case: the server stops right after answering a
 * heartbeat sent at t. The next one leaves at t + span/3 and is given up at t + 2·span/3 at the
 * latest; the session then drops that connection, the client connects to the next member, and a
 * heartbeat leaves right after the handshake: the last third of the span (less the drift and the
 * round trip) is left for one connect and one answer. The Java client waits 2/3 of the session
 * timeout before it gives a silent server up, which is later than this deadline once a tick is
 * taken off (serverTickMs) or the session is short: it does not have to tell anyone of a loss
 * before the leader expires the session, and fencekit does.
 */
export function heartbeatCadence(spanMs: number, callTimeoutMs: number): HeartbeatCadence {
  const third = spanMs / 3;
  return {
    intervalMs: third,
    answerWithinMs: Math.min(third, callTimeoutMs),
    // Soon, but not a busy loop against a server that answers every heartbeat with an error.
    retryMs: Math.max(spanMs / 20, 20),
  };
}
