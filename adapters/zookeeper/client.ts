import zookeeper from 'node-zookeeper-client';
import { monotonicNow } from '../../src/clock.js';
import { BackendUnavailableError, type LossReason } from '../../src/errors.js';
import { SessionLiveness } from '../../src/session-liveness.js';
import { confirmThroughLeader, trustedSpanMs } from './heartbeat.js';

const { Exception } = zookeeper;

/** A ZooKeeper error code name ('NO_NODE', 'NODE_EXISTS', 'CONNECTION_LOSS' …). */
export function zkCode(error: unknown): string | undefined {
  return error instanceof Exception ? error.getName() : undefined;
}

export interface ZkSessionOptions {
  connectString: string;
  sessionTimeoutMs: number;
  driftRate: number;
  /** Deadline of each call. */
  callTimeoutMs: number;
  connectTimeoutMs: number;
  /** The servers' tickTime (an upper bound), added to the safety margin: see heartbeat.ts. */
  serverTickMs: number;
  /** 'user:password' for digest auth, added before any call. */
  digest?: string;
}

type Callback<T> = (error: Error | zookeeper.Exception | null, value: T) => void;

/**
 * The one promise wrapper over node-zookeeper-client, and the session it holds. The client library
 * reconnects by itself within a session; this class decides when the session can no longer be
 * trusted: a heartbeat through the leader (heartbeat.ts) every (timeout − tick)/3, and ownership is
 * confirmed until `sent + (timeout − tick) × (1 − drift) − rtt` after the last answered one, the
 * earliest the leader could expire the session. Expiry reported by the server ends it at once. A lost session is never
 * revived: the provider opens a new one for later calls.
 */
export class ZkSession {
  readonly client: zookeeper.Client;
  readonly #options: ZkSessionOptions;
  readonly #liveness: SessionLiveness;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #timeoutMs: number;
  #ended = false;

  private constructor(client: zookeeper.Client, options: ZkSessionOptions) {
    this.client = client;
    this.#options = options;
    this.#timeoutMs = options.sessionTimeoutMs;
    // A session written off here must end on the server too: the library would otherwise reconnect
    // and ping it alive, and its nodes would keep blocking their names.
    this.#liveness = new SessionLiveness(options.driftRate, () => {
      clearTimeout(this.#heartbeatTimer);
      this.#end();
    });
  }

  static async open(options: ZkSessionOptions): Promise<ZkSession> {
    const client = zookeeper.createClient(options.connectString, {
      sessionTimeout: options.sessionTimeoutMs,
      spinDelay: 100,
      retries: 0, // never replay a call: a replayed sequential create would leave an orphan node
    });
    const session = new ZkSession(client, options);
    const sentAt = monotonicNow();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        client.close();
        reject(
          new BackendUnavailableError(
            `zookeeper: no session from ${options.connectString} within ${options.connectTimeoutMs} ms`,
          ),
        );
      }, options.connectTimeoutMs);
      client.once('connected', () => {
        clearTimeout(timer);
        resolve();
      });
      client.connect();
    });
    if (options.digest) client.addAuthInfo('digest', Buffer.from(options.digest));
    // The server may have negotiated another timeout (clamped to 2..20 ticks).
    session.#timeoutMs = client.getSessionTimeout() || options.sessionTimeoutMs;
    client.on('expired', () => session.#lose('session-lost'));
    session.#liveness.confirmed(sentAt, session.#trustedSpan);
    session.#scheduleHeartbeat(session.#interval);
    return session;
  }

  get sessionTimeoutMs(): number {
    return this.#timeoutMs;
  }

  get alive(): boolean {
    return this.#liveness.alive;
  }

  get signal(): AbortSignal {
    return this.#liveness.signal;
  }

  /** The session id as the server shows it in a node's ephemeralOwner. */
  get sessionId(): Buffer {
    return this.client.getSessionId();
  }

  /** Calls onLost once if the session is lost; returns the function that unsubscribes. */
  whenLost(onLost: (reason: LossReason) => void): () => void {
    return this.#liveness.whenLost(onLost);
  }

  /** Closes the session (its ephemeral nodes go at once). */
  close(): void {
    this.#lose('closed');
    this.#end();
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.client.close();
  }

  /** For tests of holder death: drop the connection without closing; the server expires the session. */
  abandon(): void {
    this.#ended = true; // no goodbye: the server must expire it
    this.#lose('closed');
    const manager = (this.client as unknown as { connectionManager: { socket?: import('node:net').Socket } })
      .connectionManager;
    // Detach the library from its socket first, so that it neither reconnects nor says goodbye.
    manager.socket?.removeAllListeners();
    manager.socket?.on('error', () => undefined);
    manager.socket?.destroy();
    this.client.removeAllListeners();
  }

  get #trustedSpan(): number {
    return trustedSpanMs(this.#timeoutMs, this.#options.serverTickMs);
  }

  /** A third of the span one answer vouches for: two more tries fit before its deadline. */
  get #interval(): number {
    return this.#trustedSpan / 3;
  }

  #scheduleHeartbeat(delay: number): void {
    if (!this.alive) return;
    this.#heartbeatTimer = setTimeout(() => void this.#heartbeat(), delay);
  }

  async #heartbeat(): Promise<void> {
    const sentAt = monotonicNow();
    try {
      await this.call<unknown>(
        (cb) => confirmThroughLeader(this.client, cb),
        Math.min(this.#interval, this.#options.callTimeoutMs),
      );
      if (!this.alive) return;
      this.#liveness.confirmed(sentAt, this.#trustedSpan);
      this.#scheduleHeartbeat(this.#interval);
    } catch {
      this.#scheduleHeartbeat(Math.max(this.#trustedSpan / 10, 50));
    }
  }

  #lose(reason: LossReason): void {
    this.#liveness.lose(reason);
  }

  /** Runs one callback-style call with a deadline; ZooKeeper errors keep their code (zkCode). */
  call<T>(start: (cb: Callback<T>) => void, timeoutMs = this.#options.callTimeoutMs): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new BackendUnavailableError(`zookeeper: call timed out after ${timeoutMs} ms`)),
        timeoutMs,
      );
      start((error, value) => {
        clearTimeout(timer);
        if (error) reject(error);
        else resolve(value);
      });
    });
  }
}
