import net from 'node:net';
import tls, { type ConnectionOptions as TlsConnectionOptions } from 'node:tls';
import { Code, ZkError } from './codes.js';
import { FrameDecoder } from './frames.js';
import { JuteReader, JuteWriter, WireError } from './jute.js';
import { Op, Xid } from './ops.js';

/** A request waiting for its reply; replies come back in request order. */
export interface Pending {
  xid: number;
  op: number;
  /** The reply arrived: err is the reply header's code; r holds the body. Throwing ends the connection. */
  reply(err: number, r: JuteReader): void;
  /** The connection ended first. */
  lost(error: ZkError): void;
}

export interface Handshake {
  sessionId: bigint;
  passwd: Buffer;
  /** The session timeout the server granted. */
  timeoutMs: number;
}

export interface ConnectionOptions {
  host: string;
  port: number;
  /** Session to resume (0n and 16 zero bytes for a new one). */
  sessionId: bigint;
  passwd: Buffer;
  lastZxid: bigint;
  requestedTimeoutMs: number;
  /**
   * TLS towards the server (Node's options: ca, cert, key, servername, rejectUnauthorized …);
   * undefined: plain TCP. The server's certificate is checked for servername, else for host.
   */
  tls?: TlsConnectionOptions;
  /** TCP connect, the TLS handshake and ZooKeeper's handshake must all finish within this. */
  connectTimeoutMs: number;
  /** Largest frame accepted from the server (see frames.ts). */
  maxFrameBytes: number;
  /** Gives up the attempt (the client was closed). */
  signal: AbortSignal;
}

export interface ConnectionEvents {
  /** Watch notification (xid -1): type, keeper state, server path. */
  event(type: number, state: number, path: string): void;
  /** Highest zxid seen in a reply header. */
  zxid(zxid: bigint): void;
  /** An auth packet (xid -4) was refused. */
  authFailed(): void;
  /** The connection ended (once), with why. */
  closed(reason: Error): void;
}

/** An auth packet's answer: replies to auth packets (xid -4) come back in the order they were sent. */
interface AuthReply {
  accepted(): void;
  refused(error: ZkError): void;
}

/**
 * One TCP (or TLS) connection to one server: the handshake, then framed requests matched to replies by
 * xid in order, pings while open, and a read deadline (a frozen server keeps its socket open, so
 * silence is the only sign). Only a whole frame counts as hearing from the server, as in the Java
 * client: bytes that never complete a frame are a stream out of step, and the deadline ends it.
 * Everything the socket delivers is decoded inside a guard: a bad
 * frame, an unknown reply or an xid out of order destroys this connection and fails its pending
 * calls with CONNECTION_LOSS, and never throws out of a socket event.
 */
export class Connection {
  readonly #socket: net.Socket | tls.TLSSocket;
  readonly #decoder: FrameDecoder;
  readonly #pending: Pending[] = [];
  readonly #authReplies: AuthReply[] = [];
  readonly #events: ConnectionEvents;
  #handshake: ((r: JuteReader) => void) | undefined;
  #nextXid = 1;
  #closed = false;
  #pingTimer: NodeJS.Timeout | undefined;
  #readTimer: NodeJS.Timeout | undefined;
  #readTimeoutMs = 0;
  /** When the last whole frame arrived (performance.now()). */
  #lastHeardAt = performance.now();
  #corked = false;

  private constructor(socket: net.Socket | tls.TLSSocket, events: ConnectionEvents, maxFrameBytes: number) {
    this.#socket = socket;
    this.#decoder = new FrameDecoder(maxFrameBytes);
    this.#events = events;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (error) => this.destroy(error));
    socket.on('close', () => this.destroy(new Error('connection closed by the server')));
  }

  /**
   * Connects and shakes hands; rejects with SESSION_EXPIRED when the server no longer knows the
   * session. A TLS handshake that fails rejects with Node's TLS error (its code says why).
   */
  static open(options: ConnectionOptions, events: ConnectionEvents): Promise<[Connection, Handshake]> {
    return new Promise((resolve, reject) => {
      const address = { host: options.host, port: options.port };
      const socket = options.tls ? tls.connect({ ...options.tls, ...address }) : net.connect(address);
      let settled = false;
      const fail = (error: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        options.signal.removeEventListener('abort', onAbort);
        reject(error);
      };
      const onAbort = () => connection.destroy(new Error('connection attempt cancelled'));
      const connection = new Connection(
        socket,
        {
          ...events,
          closed: (reason) => {
            fail(reason);
            events.closed(reason);
          },
        },
        options.maxFrameBytes,
      );
      const timer = setTimeout(
        () => connection.destroy(new Error(`no handshake within ${options.connectTimeoutMs} ms`)),
        options.connectTimeoutMs,
      );
      connection.#handshake = (r) => {
        r.int(); // protocol version
        const timeoutMs = r.int();
        const sessionId = r.long();
        const passwd = Buffer.from(r.buffer() ?? Buffer.alloc(0));
        if (timeoutMs <= 0) {
          const expired = new ZkError(Code.SESSION_EXPIRED);
          fail(expired);
          connection.destroy(expired);
          return;
        }
        settled = true;
        clearTimeout(timer);
        options.signal.removeEventListener('abort', onAbort);
        connection.#startTimers(timeoutMs);
        resolve([connection, { sessionId, passwd, timeoutMs }]);
      };
      if (options.signal.aborted) onAbort();
      else options.signal.addEventListener('abort', onAbort, { once: true });
      // Over TLS, nothing is sent before the server's certificate was checked.
      socket.once(options.tls ? 'secureConnect' : 'connect', () => {
        const w = new JuteWriter()
          .int(0) // protocol version
          .long(options.lastZxid)
          .int(options.requestedTimeoutMs)
          .long(options.sessionId)
          .buffer(options.passwd)
          .bool(false); // read-only: no
        socket.write(w.frame());
      });
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** When the last whole frame came from the server (performance.now() time). */
  get lastHeardAt(): number {
    return this.#lastHeardAt;
  }

  /** Milliseconds since the server's last whole frame on this connection (any reply, event or ping). */
  get silentForMs(): number {
    return performance.now() - this.#lastHeardAt;
  }

  /** Sends a numbered request; its reply (or the connection's end) goes to the pending entry. */
  request(
    op: number,
    body: ((w: JuteWriter) => void) | undefined,
    pending: Omit<Pending, 'xid' | 'op'>,
  ): void {
    if (this.#closed) {
      pending.lost(new ZkError(Code.CONNECTION_LOSS));
      return;
    }
    const xid = this.#nextXid;
    this.#nextXid = xid >= 0x7fffffff ? 1 : xid + 1;
    this.#pending.push({ xid, op, ...pending });
    this.#write(xid, op, body);
  }

  /**
   * Sends an auth packet; resolves when the server accepts it, rejects with AUTH_FAILED when it
   * refuses (events.authFailed is told too) or with CONNECTION_LOSS when the connection ends first.
   */
  authenticate(scheme: string, auth: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.#closed) {
        reject(new ZkError(Code.CONNECTION_LOSS));
        return;
      }
      this.#authReplies.push({ accepted: resolve, refused: reject });
      this.#write(Xid.auth, Op.auth, (w) => w.int(0).string(scheme).buffer(auth));
    });
  }

  /** Sends a request with a reserved xid (setWatches); its reply is not queued. */
  special(xid: number, op: number, body: (w: JuteWriter) => void): void {
    if (!this.#closed) this.#write(xid, op, body);
  }

  #write(xid: number, op: number, body: ((w: JuteWriter) => void) | undefined): void {
    const w = new JuteWriter().int(xid).int(op);
    body?.(w);
    // Requests made in the same tick (pipelined calls) leave in one write: one syscall, one segment.
    if (!this.#corked) {
      this.#corked = true;
      this.#socket.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.#socket.uncork();
      });
    }
    this.#socket.write(w.frame());
  }

  /** Ends the connection (once): pending calls fail with CONNECTION_LOSS. */
  destroy(reason: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#pingTimer);
    clearTimeout(this.#readTimer);
    this.#socket.destroy();
    const lost = new ZkError(Code.CONNECTION_LOSS, undefined, reason.message);
    for (const pending of this.#pending.splice(0)) pending.lost(lost);
    for (const auth of this.#authReplies.splice(0)) auth.refused(lost);
    this.#events.closed(reason);
  }

  #startTimers(timeoutMs: number): void {
    // As the Java client: give up on a server silent for 2/3 of the session, ping well within it.
    this.#readTimeoutMs = (timeoutMs * 2) / 3;
    this.#touch();
    this.#pingTimer = setInterval(() => this.special(Xid.ping, Op.ping, () => undefined), timeoutMs / 3);
    this.#pingTimer.unref();
  }

  /** A whole frame came: the server is there, and the read deadline starts again. */
  #touch(): void {
    this.#lastHeardAt = performance.now();
    if (this.#readTimeoutMs === 0 || this.#closed) return;
    clearTimeout(this.#readTimer);
    this.#readTimer = setTimeout(
      () => this.destroy(new Error(`server silent for ${Math.round(this.#readTimeoutMs)} ms`)),
      this.#readTimeoutMs,
    );
    this.#readTimer.unref();
  }

  #onData(chunk: Buffer): void {
    if (this.#closed) return;
    try {
      const frames = this.#decoder.push(chunk);
      if (frames.length > 0) this.#touch();
      for (const frame of frames) {
        if (this.#closed) return;
        this.#onFrame(new JuteReader(frame));
      }
    } catch (error) {
      this.destroy(error instanceof Error ? error : new WireError(String(error)));
    }
  }

  #onFrame(r: JuteReader): void {
    const handshake = this.#handshake;
    if (handshake) {
      this.#handshake = undefined;
      handshake(r);
      return;
    }
    const xid = r.int();
    const zxid = r.long();
    const err = r.int();
    if (zxid > 0n) this.#events.zxid(zxid);
    if (xid === Xid.ping || xid === Xid.setWatches) return;
    if (xid === Xid.auth) {
      const waiting = this.#authReplies.shift();
      if (err === Code.OK) {
        waiting?.accepted();
        return;
      }
      waiting?.refused(new ZkError(err));
      this.#events.authFailed();
      return;
    }
    if (xid === Xid.notification) {
      const type = r.int();
      const state = r.int();
      this.#events.event(type, state, r.string() ?? '');
      return;
    }
    const head = this.#pending[0];
    if (!head || head.xid !== xid) {
      throw new WireError(`reply xid ${xid} does not match the next request (${head?.xid ?? 'none'})`);
    }
    this.#pending.shift();
    try {
      head.reply(err, r);
    } catch (error) {
      head.lost(new ZkError(Code.CONNECTION_LOSS, undefined, String((error as Error)?.message ?? error)));
      throw error;
    }
  }
}
