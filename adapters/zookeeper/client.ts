import { setMaxListeners } from 'node:events';
import { sleepUnlessWoken } from '../../src/backoff.js';
import { monotonicNow } from '../../src/clock.js';
import {
  AuthenticationError,
  BackendUnavailableError,
  InvalidArgumentError,
  type LossReason,
} from '../../src/errors.js';
import { SessionLiveness, type SessionRenewalListener } from '../../src/session-liveness.js';
import { certificateRefusal, nodeTlsOptions, type TlsOptions } from '../../src/tls.js';
import {
  confirmThroughLeader,
  effectiveTickMs,
  type HeartbeatCadence,
  heartbeatCadence,
  provenTouch,
  trustedSpanMs,
} from './heartbeat.js';
import { SessionRemovals } from './removals.js';
import { ZkClient } from './wire/client.js';
import { zkCode } from './wire/codes.js';

export { zkCode } from './wire/codes.js';

export interface ZkSessionOptions {
  connectString: string;
  sessionTimeoutMs: number;
  driftRate: number;
  /** Deadline of each call. */
  callTimeoutMs: number;
  /** Opening gives up after this long (BackendUnavailableError). */
  connectTimeoutMs: number;
  /** The servers' tickTime (an upper bound), added to the safety margin: see heartbeat.ts. */
  serverTickMs: number;
  /** 'user:password' for digest auth, added before any call. */
  digest?: string;
  /** More digest credentials (rotated passwords), sent after digest on every connection. */
  addedDigests?: readonly string[];
  /** Largest frame accepted from a server (the client's jute.maxbuffer). */
  maxFrameBytes?: number;
  /** TLS towards every server of the connect string; undefined: plain TCP. */
  tls?: TlsOptions;
  /** Told of each heartbeat (metrics, renew-failed events). */
  onRenewal?: SessionRenewalListener;
}

/**
 * The session the adapter works in, over fencekit's own protocol client (wire/). The client
 * reconnects by itself within a session; this class decides when the session can no longer be
 * trusted: a heartbeat through the leader every (timeout − tick)/4, and ownership is confirmed
 * until the earliest moment the leader could expire the session, from a touch it is known to have
 * applied (provenTouch in heartbeat.ts): never later than `sent + (timeout − tick) × (1 − drift) − rtt`
 * after the last answered heartbeat. A heartbeat that a silent server does not answer in time
 * moves the session to the next server, whose handshake confirms it at once (heartbeatCadence).
 * Expiry reported by the server ends it at once. A session lost locally is closed at once (the
 * server then drops its nodes instead of keeping them for a client that reconnects and pings), and
 * never revived: the provider opens a new one for later calls.
 * The session owns every node it created: remove() and removeMatching() delete them through one
 * retry loop (removals.ts), and a removal it cannot confirm within a session timeout ends the
 * session, so that the server deletes the node with it.
 */
export class ZkSession {
  readonly client: ZkClient;
  readonly #options: ZkSessionOptions;
  readonly #liveness: SessionLiveness;
  readonly #removals: SessionRemovals;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #heartbeatInFlight = false;
  /** Connections made after the first: a heartbeat counts only on the connection it was sent on. */
  #connections = 0;
  /** Send times of the heartbeats answered on the current connection (the recent ones). */
  #answeredSends: number[] = [];
  /** When the last connection ended: a later handshake was sent after it. */
  #disconnectedAt: number | undefined;

  private constructor(client: ZkClient, options: ZkSessionOptions) {
    this.client = client;
    this.#options = options;
    this.#liveness = new SessionLiveness(options.driftRate, () => {
      clearTimeout(this.#heartbeatTimer);
      void client.close();
    });
    // Every removal under way waits on it (close() may release thousands at once): not a leak.
    setMaxListeners(0, this.#liveness.signal);
    this.#removals = new SessionRemovals({
      client,
      signal: this.#liveness.signal,
      callTimeoutMs: options.callTimeoutMs,
      sessionTimeoutMs: () => client.sessionTimeoutMs,
      end: () => this.#lose('unconfirmed'),
    });
  }

  static async open(options: ZkSessionOptions, signal?: AbortSignal): Promise<ZkSession> {
    const sentAt = monotonicNow();
    let client: ZkClient;
    try {
      client = await ZkClient.connect(
        {
          connectString: options.connectString,
          sessionTimeoutMs: options.sessionTimeoutMs,
          callTimeoutMs: options.callTimeoutMs,
          auth: [...(options.digest ? [options.digest] : []), ...(options.addedDigests ?? [])].map(
            (digest) => ({ scheme: 'digest', auth: Buffer.from(digest) }),
          ),
          ...(options.maxFrameBytes !== undefined ? { maxFrameBytes: options.maxFrameBytes } : {}),
          ...(options.tls ? { tls: nodeTlsOptions(options.tls) } : {}),
          refused: (error) => certificateRefusal(error) !== undefined,
        },
        { timeoutMs: options.connectTimeoutMs, ...(signal ? { signal } : {}) },
      );
    } catch (error) {
      if (signal?.aborted && error === signal.reason) throw error;
      // A certificate refused either way: retrying does not help (a waiting acquire fails at once).
      const refused = certificateRefusal(error);
      if (refused !== undefined) {
        throw new AuthenticationError('zookeeper', hostsOf(options.connectString), refused, { cause: error });
      }
      throw new BackendUnavailableError(
        `zookeeper: no session from ${options.connectString} within ${options.connectTimeoutMs} ms`,
        { cause: error },
      );
    }
    if (client.chroot !== '') await ZkSession.#assertChroot(client, options, signal);
    const session = new ZkSession(client, options);
    client.onState((state) => {
      if (state === 'expired' || state === 'closed') session.#lose('session-lost');
      else if (state === 'connected') session.#onReconnected();
      else if (state === 'disconnected') session.#disconnectedAt ??= monotonicNow();
    });
    // The leader made the session no earlier than sentAt, with the full timeout from then.
    session.#liveness.confirmed(sentAt, client.sessionTimeoutMs);
    session.#scheduleHeartbeat(session.#cadence.intervalMs);
    return session;
  }

  /**
   * A chroot that does not exist makes every create fail with NO_NODE, which recipes take for a
   * folder removed meanwhile and retry without end: refuse such a session once, naming the chroot.
   */
  static async #assertChroot(
    client: ZkClient,
    options: ZkSessionOptions,
    signal?: AbortSignal,
  ): Promise<void> {
    // '/' is the chroot itself; exists needs no permission on it.
    const found = await client
      .exists('/', { timeoutMs: options.connectTimeoutMs, ...(signal ? { signal } : {}) })
      .catch(async (error: unknown) => {
        await client.close();
        if (signal?.aborted && error === signal.reason) throw error;
        throw new BackendUnavailableError(`zookeeper: checking the chroot ${client.chroot} failed`, {
          cause: error,
        });
      });
    if (found === null) {
      await client.close();
      throw new InvalidArgumentError(
        'connectString',
        `the chroot ${client.chroot} does not exist on the ZooKeeper server: create it first, or connect without it`,
      );
    }
  }

  /** The session timeout the server granted (it clamps requests to 2..20 ticks). */
  get sessionTimeoutMs(): number {
    return this.client.sessionTimeoutMs;
  }

  /** Deadline of each call. */
  get callTimeoutMs(): number {
    return this.#options.callTimeoutMs;
  }

  get alive(): boolean {
    return this.#liveness.alive;
  }

  /** How long (ms) the last confirmation still vouches for the session; 0 once it is lost. */
  get trustLeftMs(): number {
    return this.#liveness.trustLeftMs;
  }

  get signal(): AbortSignal {
    return this.#liveness.signal;
  }

  /** The session id as the server shows it in a node's ephemeralOwner. */
  get sessionId(): bigint {
    return this.client.sessionId;
  }

  /**
   * Adds digest credentials 'user:password' to the live session, sent again on every reconnect
   * (ZkClient.addAuth); rejects with the client's AUTH_FAILED when the server refuses them.
   */
  addDigest(digest: string, timeoutMs = this.#options.callTimeoutMs): Promise<void> {
    return this.client.addAuth({ scheme: 'digest', auth: Buffer.from(digest) }, { timeoutMs });
  }

  /** Calls onLost once if the session is lost; returns the function that unsubscribes. */
  whenLost(onLost: (reason: LossReason) => void): () => void {
    return this.#liveness.whenLost(onLost);
  }

  /**
   * Deletes a node this session created, retrying until the server confirms (true) or the session
   * ends (false: its nodes went with it). A removal not confirmed within a session timeout ends the
   * session. Never rejects; the session owns the removal whether or not anyone waits for it.
   */
  remove(path: string): Promise<boolean> {
    return this.#removals.remove(path);
  }

  /**
   * After a create whose outcome is unknown: deletes this session's nodes under parent whose
   * names start with prefix (our request's uuid), as remove() does, listing again on each try.
   */
  removeMatching(parent: string, prefix: string): Promise<boolean> {
    return this.#removals.removeMatching(parent, prefix);
  }

  /**
   * remove(), waited for at most waitMs (default callTimeoutMs) or until signal aborts, as a
   * release waits: resolves once the server confirmed the delete; rejects with
   * BackendUnavailableError when it did not in time or the session ended first, or with the
   * signal's reason. Either way the session owns the removal from then on.
   */
  async removeWithin(path: string, wait: { waitMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    const waitMs = wait.waitMs ?? this.#options.callTimeoutMs;
    const timer = sleepUnlessWoken(waitMs, wait.signal);
    const confirmed = await Promise.race([this.remove(path), timer.done.then(() => false)]).finally(
      () => timer.wake(), // confirmed first: the timer goes
    );
    if (!confirmed) {
      throw new BackendUnavailableError(
        `zookeeper: deleting ${path} was not confirmed within ${waitMs} ms; the session retries it until confirmed or it ends`,
      );
    }
  }

  /** What the session is still removing (for tests and inspection). */
  get pendingRemovals(): string[] {
    return this.#removals.pending;
  }

  /**
   * Closes the session (its ephemeral nodes go at once, and so do the removals under way: they
   * stop); bounded by timeoutMs (default callTimeoutMs).
   */
  close(timeoutMs?: number): Promise<void> {
    const closing = this.client.close(timeoutMs); // first: losing the session would close with the default bound
    this.#lose('closed');
    return closing;
  }

  /** For tests of holder death: drop the connection without closing; the server expires the session. */
  abandon(): void {
    this.client.abandon();
    this.#lose('closed');
  }

  get #trustedSpan(): number {
    return trustedSpanMs(this.client.sessionTimeoutMs, this.#options.serverTickMs);
  }

  get #cadence(): HeartbeatCadence {
    return heartbeatCadence(this.#trustedSpan, this.#options.callTimeoutMs);
  }

  #scheduleHeartbeat(delay: number): void {
    clearTimeout(this.#heartbeatTimer);
    if (!this.alive) return;
    this.#heartbeatTimer = setTimeout(() => void this.#heartbeat(), delay);
    this.#heartbeatTimer.unref();
  }

  /**
   * A new connection: its handshake made the leader validate, so touch, the session after the
   * connection before it ended: the full timeout from then (heartbeat.ts). Then a heartbeat at
   * once, to start this connection's own confirmations.
   */
  #onReconnected(): void {
    this.#connections += 1;
    this.#answeredSends = [];
    const since = this.#disconnectedAt;
    this.#disconnectedAt = undefined;
    if (since !== undefined) this.#liveness.confirmed(since, this.client.sessionTimeoutMs);
    if (!this.alive || this.#heartbeatInFlight) return; // one in flight waits for this connection
    clearTimeout(this.#heartbeatTimer);
    void this.#heartbeat();
  }

  async #heartbeat(): Promise<void> {
    if (this.#heartbeatInFlight) return;
    this.#heartbeatInFlight = true;
    const cadence = this.#cadence;
    const sentAt = monotonicNow();
    const connection = this.client.state === 'connected' ? this.#connections : undefined;
    try {
      await confirmThroughLeader(this.client, cadence.answerWithinMs);
      this.#heartbeatInFlight = false;
      if (!this.alive) return;
      this.#options.onRenewal?.('renewed', (monotonicNow() - sentAt) / 1000);
      if (connection === this.#connections) this.#confirmedThrough(sentAt);
      this.#scheduleHeartbeat(cadence.intervalMs);
    } catch (error) {
      this.#heartbeatInFlight = false;
      if (!this.alive) return;
      this.#options.onRenewal?.('failed', (monotonicNow() - sentAt) / 1000, error);
      // Sent on a connection that is still up, unanswered, and its server has sent nothing at all
      // meanwhile: it is paused or gone. Move to the next one now, while the deadline leaves time
      // for a handshake there (heartbeatCadence); waiting for the client's read timeout would lose
      // the session here although the ensemble keeps it. A server that still answers other calls
      // is busy (or this process is), and dropping its connection would fail them all: stay.
      // The timeout fires from a timer, before this turn reads the sockets: after a busy stretch of
      // this process, frames that did arrive are still unread. Look again once they are read.
      const silent = () =>
        zkCode(error) === 'OPERATION_TIMEOUT' &&
        connection === this.#connections &&
        this.client.silentForMs >= cadence.answerWithinMs;
      if (silent()) await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.alive && silent()) {
        this.client.dropConnection(`no heartbeat answer within ${Math.round(cadence.answerWithinMs)} ms`);
      }
      if (!this.alive) return;
      // Try again soon; the liveness deadline alone decides when the session is lost.
      this.#scheduleHeartbeat(cadence.retryMs);
    }
  }

  /** A heartbeat sent at sentAt was answered on the connection it was sent on: see provenTouch. */
  #confirmedThrough(sentAt: number): void {
    const timeout = this.client.sessionTimeoutMs;
    const anchor = provenTouch(
      this.#answeredSends,
      sentAt,
      effectiveTickMs(timeout, this.#options.serverTickMs),
    );
    if (anchor !== undefined) {
      this.#liveness.confirmed(anchor, timeout, monotonicNow() - sentAt);
      this.#answeredSends = this.#answeredSends.filter((at) => at >= anchor); // older ones prove less
    }
    this.#answeredSends.push(sentAt);
  }

  #lose(reason: LossReason): void {
    this.#liveness.lose(reason);
  }
}

/** The host:port list of a connect string, without its chroot: what an AuthenticationError names. */
export function hostsOf(connectString: string): string {
  const slash = connectString.indexOf('/');
  return slash < 0 ? connectString : connectString.slice(0, slash);
}
