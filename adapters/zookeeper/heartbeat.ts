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
