/**
 * How long the client waits before its next connection attempt, so that a server that drops every
 * connection right after the handshake, or refuses at once, is not hammered, and clients cut off
 * together do not come back together.
 *
 * - After an established connection ends: a random wait in 0..1 s, as the Java client (not after
 *   a connection the session dropped itself for a silent server: ZkClient reconnects at once).
 * - After a round in which every server failed: capped exponential backoff (50 ms doubling up to
 *   1 s), jittered to 50..100 % of it, as the Java client's second wait after a failed round.
 *
 * Both come out of the session. The server expires it a session timeout after it last heard from
 * us, which is about when we last heard from it; a connection ended by the read deadline (2/3 of
 * the session) leaves only a third of it. So no wait takes more than half of what is left of the
 * session, keeping the other half for the connection attempt itself. The wait after a failed round
 * keeps a floor of FLOOR_MS, and once nothing is left of the session (the server will answer that
 * it expired) it is the plain backoff again: a long outage is never tried in a hot loop.
 *
 * wire/ imports nothing outside itself, hence this small pacing of its own rather than src/backoff.ts.
 */
const RECONNECT_MAX_MS = 1_000;
const BACKOFF_FIRST_MS = 50;
const BACKOFF_MAX_MS = 1_000;
const FLOOR_MS = 20;

export class ReconnectPacing {
  #failedRounds = 0;

  /** random: a number in [0, 1), as Math.random (tests pass their own). */
  constructor(readonly random: () => number = Math.random) {}

  /** A connection was established: the backoff starts over. */
  established(): void {
    this.#failedRounds = 0;
  }

  /** Wait before reconnecting after an established connection ended; sessionLeftMs: see above. */
  afterConnection(sessionLeftMs: number): number {
    return this.random() * Math.min(RECONNECT_MAX_MS, Math.max(0, sessionLeftMs / 2));
  }

  /** Wait after a round in which no server could be connected to. */
  afterFailedRound(sessionLeftMs: number): number {
    this.#failedRounds += 1;
    const backoff = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (this.#failedRounds - 1));
    const jittered = backoff * (0.5 + this.random() / 2);
    if (sessionLeftMs <= 0) return jittered;
    return Math.min(jittered, Math.max(FLOOR_MS, sessionLeftMs / 2));
  }
}
