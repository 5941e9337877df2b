import type { ConnectionOptions as TlsConnectionOptions } from 'node:tls';
import { Code, ZkError } from './codes.js';
import { parseConnectString, shuffled } from './connect-string.js';
import { Connection, type Handshake } from './connection.js';
import { MAX_FRAME_BYTES } from './frames.js';
import type { JuteReader, JuteWriter } from './jute.js';
import {
  type ACL,
  CreateMode,
  decodeMulti,
  encode,
  encodeMulti,
  type MultiOp,
  type MultiResult,
  OPEN_ACL_UNSAFE,
  Op,
  readStat,
  type Stat,
  Xid,
} from './ops.js';
import { ReconnectPacing } from './reconnect-pacing.js';
import {
  eventType,
  setWatchesBatches,
  type WatchKind,
  type WatchListener,
  WatchRegistry,
} from './watches.js';

export type ZkState = 'connecting' | 'connected' | 'disconnected' | 'expired' | 'closed';

export interface ZkClientOptions {
  /** host:port[,host:port…][/chroot] */
  connectString: string;
  /** Requested session timeout; the server clamps it to 2..20 ticks. */
  sessionTimeoutMs: number;
  /** Default deadline of each call. */
  callTimeoutMs: number;
  /** Auth packets sent first on every connection, e.g. { scheme: 'digest', auth: 'user:pw' }. */
  auth?: Credential[];
  /** Largest frame accepted from a server, as the Java client's jute.maxbuffer (default: see frames.ts). */
  maxFrameBytes?: number;
  /** TLS towards every server, on every connection (Node's options); undefined: plain TCP. */
  tls?: TlsConnectionOptions;
  /**
   * Whether a failed connection attempt was a refusal that no retry cures (a certificate either
   * side did not accept). Before the first session, a round of the servers in which one refused
   * and none let us in ends the client with AUTH_FAILED (its cause: that attempt's error).
   */
  refused?: (error: unknown) => boolean;
}

/** An auth packet's content, e.g. { scheme: 'digest', auth: Buffer.from('user:password') }. */
export interface Credential {
  scheme: string;
  auth: Buffer;
}

export interface CallOptions {
  /** Deadline of this call (default: the client's callTimeoutMs). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface WatchOptions extends CallOptions {
  /** Called once when the node (or its children) change; remove it with unwatch() when giving up. */
  watch?: WatchListener;
}

/** One request as #call sends it. */
interface ZkCall<T> {
  op: number;
  /** The node it names (errors name it; a watch is registered on it). */
  path: string | undefined;
  body: (w: JuteWriter) => void;
  decode: (r: JuteReader) => T;
  opts?: CallOptions | undefined;
  /** The watch this call sets: on `kind` when it succeeds, on `onNoNode` when the node is absent. */
  watch?: { listener: WatchListener; kind: WatchKind; onNoNode?: WatchKind } | undefined;
  /** A failed reply still carries a body to decode (multi: which operation failed). */
  errorsInBody?: boolean;
}

const TERMINAL: ReadonlySet<ZkState> = new Set(['expired', 'closed']);
/**
 * Largest SetWatches request, as the Java client: a server drops a request past its jute.maxbuffer
 * (1 MiB by default), and a session whose watches cannot be handed over could reconnect nowhere.
 */
const SET_WATCHES_MAX_BYTES = 128 * 1024;

/**
 * A ZooKeeper session over a succession of connections: it connects to the servers of the
 * connect string in random order, resumes the session (id and password) after a lost connection
 * until the server says it expired, re-arms its watches, and fails calls in flight with
 * CONNECTION_LOSS when a connection ends. Every call has a deadline and may be cancelled by a
 * signal; calls made while disconnected wait for a connection within their deadline. It never
 * replays a call.
 */
export class ZkClient {
  #failedConnects = 0;
  readonly #options: ZkClientOptions;
  readonly #servers: { host: string; port: number }[];
  readonly #chroot: string;
  readonly #watches = new WatchRegistry();
  readonly #stateListeners = new Set<(state: ZkState) => void>();
  /** Calls waiting for a connection: called with the connection, or the error that ends the session. */
  readonly #waiting = new Set<(ready: Connection | ZkError) => void>();
  readonly #stop = new AbortController();
  readonly #pacing = new ReconnectPacing();
  /** Credentials sent first on every connection: the options' and those added since (addAuth). */
  readonly #credentials: Credential[];
  /** The answer to each credential sent on a connection, so none is sent twice on one. */
  readonly #authSent = new WeakMap<Connection, Map<Credential, Promise<void>>>();
  #state: ZkState = 'connecting';
  /** Why the session ended: every later call fails with it. */
  #endedWith: ZkError | undefined;
  /** When the last connection last heard from its server; undefined before the first. */
  #lastHeardAt: number | undefined;
  /** The connection dropConnection() ended, if the current one was: its successor starts at once. */
  #droppedByCaller: Connection | undefined;
  #conn: Connection | undefined;
  #sessionId = 0n;
  #passwd: Buffer = Buffer.alloc(16);
  #timeoutMs: number;
  #lastZxid = 0n;
  #closing: Promise<void> | undefined;

  private constructor(options: ZkClientOptions) {
    this.#options = options;
    const { servers, chroot } = parseConnectString(options.connectString);
    this.#servers = shuffled(servers);
    this.#chroot = chroot;
    this.#timeoutMs = options.sessionTimeoutMs;
    this.#credentials = [...(options.auth ?? [])];
    void this.#run();
  }

  /** Opens a session; rejects (and leaves nothing running) when none is made within timeoutMs or signal aborts. */
  static async connect(
    options: ZkClientOptions,
    opts: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<ZkClient> {
    const client = new ZkClient(options);
    try {
      await client.#connection(performance.now() + opts.timeoutMs, opts.signal, () => [
        `no session from ${options.connectString} within ${opts.timeoutMs} ms`,
      ]);
      return client;
    } catch (error) {
      await client.close();
      throw error;
    }
  }

  /** @internal Connection attempts that failed so far (for tests of long outages). */
  get reconnectRoundsForTests(): number {
    return this.#failedConnects;
  }

  get state(): ZkState {
    return this.#state;
  }

  get sessionId(): bigint {
    return this.#sessionId;
  }

  /** The chroot of the connect string ('' for none): every path is relative to it. */
  get chroot(): string {
    return this.#chroot;
  }

  /** The session timeout the server granted. */
  get sessionTimeoutMs(): number {
    return this.#timeoutMs;
  }

  /** Watch registrations (kind, path) held: one per path and kind, however many listeners. */
  get watchCount(): number {
    return this.#watches.size;
  }

  /** Calls listener on every state change; returns the function that unsubscribes. */
  onState(listener: (state: ZkState) => void): () => void {
    this.#stateListeners.add(listener);
    return () => this.#stateListeners.delete(listener);
  }

  /** A listener that gives up (timeout, cancel) removes itself; the registration goes with its last listener. */
  unwatch(path: string, listener: WatchListener): void {
    this.#watches.remove(path, listener);
  }

  create(path: string, data: Buffer, acl: readonly ACL[], mode: number, opts?: CallOptions): Promise<string> {
    return this.#call({
      op: Op.create,
      path,
      body: (w) => encode.create(w, this.#at(path), data, acl, mode),
      decode: (r) => this.#from(r.string() ?? ''),
      opts,
    });
  }

  /** create that also returns the new node's Stat (one round trip for the node and its czxid). */
  create2(
    path: string,
    data: Buffer,
    acl: readonly ACL[],
    mode: number,
    opts?: CallOptions,
  ): Promise<{ path: string; stat: Stat }> {
    return this.#call({
      op: Op.create2,
      path,
      body: (w) => encode.create(w, this.#at(path), data, acl, mode),
      decode: (r) => ({ path: this.#from(r.string() ?? ''), stat: readStat(r) }),
      opts,
    });
  }

  /**
   * Creates a container node (ZooKeeper 3.5.1 and later), which the server deletes once it has had
   * children and has none left; answered like create2. A server without containers rejects it with
   * UNIMPLEMENTED and then closes the connection (the session goes on, on the next one).
   */
  createContainer(
    path: string,
    data: Buffer,
    acl: readonly ACL[],
    opts?: CallOptions,
  ): Promise<{ path: string; stat: Stat }> {
    return this.#call({
      op: Op.createContainer,
      path,
      body: (w) => encode.create(w, this.#at(path), data, acl, CreateMode.CONTAINER),
      decode: (r) => ({ path: this.#from(r.string() ?? ''), stat: readStat(r) }),
      opts,
    });
  }

  delete(path: string, version = -1, opts?: CallOptions): Promise<void> {
    return this.#call({
      op: Op.delete,
      path,
      body: (w) => encode.pathVersion(w, this.#at(path), version),
      decode: () => undefined,
      opts,
    });
  }

  /** The node's Stat, or null when it does not exist (a watch then waits for its creation). */
  exists(path: string, opts: WatchOptions = {}): Promise<Stat | null> {
    return this.#call({
      op: Op.exists,
      path,
      body: (w) => encode.pathWatch(w, this.#at(path), opts.watch !== undefined),
      decode: (r) => readStat(r),
      opts,
      watch: opts.watch && { listener: opts.watch, kind: 'data', onNoNode: 'exist' },
    }).catch((error: unknown) => {
      if (error instanceof ZkError && error.code === Code.NO_NODE) return null;
      throw error;
    });
  }

  getData(path: string, opts: WatchOptions = {}): Promise<{ data: Buffer; stat: Stat }> {
    return this.#call({
      op: Op.getData,
      path,
      body: (w) => encode.pathWatch(w, this.#at(path), opts.watch !== undefined),
      decode: (r) => ({ data: Buffer.from(r.buffer() ?? Buffer.alloc(0)), stat: readStat(r) }),
      opts,
      watch: opts.watch && { listener: opts.watch, kind: 'data' },
    });
  }

  setData(path: string, data: Buffer, version = -1, opts?: CallOptions): Promise<Stat> {
    return this.#call({
      op: Op.setData,
      path,
      body: (w) => encode.setData(w, this.#at(path), data, version),
      decode: (r) => readStat(r),
      opts,
    });
  }

  setACL(path: string, acl: readonly ACL[], version = -1, opts?: CallOptions): Promise<Stat> {
    return this.#call({
      op: Op.setACL,
      path,
      body: (w) => encode.setACL(w, this.#at(path), acl, version),
      decode: (r) => readStat(r),
      opts,
    });
  }

  getChildren(path: string, opts: WatchOptions = {}): Promise<string[]> {
    return this.#call({
      op: Op.getChildren,
      path,
      body: (w) => encode.pathWatch(w, this.#at(path), opts.watch !== undefined),
      decode: (r) => (r.vector((x) => x.string() ?? '') ?? []) as string[],
      opts,
      watch: opts.watch && { listener: opts.watch, kind: 'child' },
    });
  }

  getChildren2(path: string, opts: WatchOptions = {}): Promise<{ children: string[]; stat: Stat }> {
    return this.#call({
      op: Op.getChildren2,
      path,
      body: (w) => encode.pathWatch(w, this.#at(path), opts.watch !== undefined),
      decode: (r) => ({ children: (r.vector((x) => x.string() ?? '') ?? []) as string[], stat: readStat(r) }),
      opts,
      watch: opts.watch && { listener: opts.watch, kind: 'child' },
    });
  }

  /** Brings this session's server up to date with the leader. */
  sync(path: string, opts?: CallOptions): Promise<void> {
    return this.#call({
      op: Op.sync,
      path,
      body: (w) => encode.path(w, this.#at(path)),
      decode: () => undefined,
      opts,
    });
  }

  /** All or nothing; rejects with the ZkError of the first operation that failed. */
  async multi(ops: readonly MultiOp[], opts?: CallOptions): Promise<MultiResult[]> {
    const results = await this.#call({
      op: Op.multi,
      path: ops[0]?.path,
      body: (w) => encodeMulti(w, ops, (p) => this.#at(p)),
      decode: (r) => decodeMulti(r, (p) => this.#from(p)),
      opts,
      errorsInBody: true,
    });
    for (const [i, result] of results.entries()) {
      if (result.op === 'error' && result.err !== Code.OK) throw new ZkError(result.err, ops[i]?.path);
    }
    return results;
  }

  /**
   * Adds a credential to the session, as the Java client's addAuthInfo (a rotated digest password):
   * sent on the current connection, and first on every later one. Resolves once a server accepted
   * it. A server that refuses it drops the connection, so the session ends, and this and every
   * later call fail with AUTH_FAILED.
   */
  async addAuth(credential: Credential, opts: CallOptions = {}): Promise<void> {
    this.#credentials.push(credential);
    const timeoutMs = opts.timeoutMs ?? this.#options.callTimeoutMs;
    const deadline = performance.now() + timeoutMs;
    const why = (): [string] => [`not connected within ${timeoutMs} ms`];
    for (;;) {
      const conn = await this.#connection(deadline, opts.signal, why);
      try {
        await settleBy(this.#authenticate(conn, credential), deadline, opts.signal);
        return;
      } catch (error) {
        // The connection ended before the answer: the next one sends the credential first.
        if (TERMINAL.has(this.#state)) throw this.#terminalError();
        if (!(error instanceof ZkError && error.code === Code.CONNECTION_LOSS)) throw error;
      }
    }
  }

  /** Creates path and its missing ancestors (persistent); an existing node is fine. */
  async mkdirp(path: string, acl: readonly ACL[] = OPEN_ACL_UNSAFE, opts?: CallOptions): Promise<void> {
    const parts = path.split('/').filter((p) => p !== '');
    let current = '';
    for (const part of parts) {
      current += `/${part}`;
      try {
        await this.create(current, Buffer.alloc(0), acl, CreateMode.PERSISTENT, opts);
      } catch (error) {
        if (!(error instanceof ZkError && error.name === 'NODE_EXISTS')) throw error;
      }
    }
  }

  /**
   * Ends the session: sends closeSession so the server removes its ephemeral nodes at once, and
   * stops reconnecting. Bounded by timeoutMs (default callTimeoutMs); idempotent.
   */
  close(timeoutMs = this.#options.callTimeoutMs): Promise<void> {
    this.#closing ??= this.#close(timeoutMs);
    return this.#closing;
  }

  async #close(timeoutMs: number): Promise<void> {
    const conn = this.#conn;
    this.#end('closed', new ZkError(Code.CONNECTION_LOSS, undefined, 'client closed'));
    if (!conn || conn.closed) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      conn.request(Op.closeSession, undefined, { reply: done, lost: done });
    });
    conn.destroy(new Error('session closed'));
  }

  /** Milliseconds since the current connection's server last sent a whole frame (Infinity when none is open). */
  get silentForMs(): number {
    return this.#conn?.silentForMs ?? Number.POSITIVE_INFINITY;
  }

  /**
   * Ends the current connection (its calls fail with CONNECTION_LOSS) and moves on to the next
   * server; the session goes on. For a caller that knows this server cannot serve it in time.
   */
  dropConnection(reason: string): void {
    const conn = this.#conn;
    if (!conn) return;
    this.#droppedByCaller = conn;
    conn.destroy(new Error(reason));
  }

  /** For tests of holder death: drops the connection without closing the session; the server expires it. */
  abandon(): void {
    const conn = this.#conn;
    this.#end('closed', new ZkError(Code.CONNECTION_LOSS, undefined, 'client abandoned'));
    conn?.destroy(new Error('abandoned'));
    this.#closing ??= Promise.resolve();
  }

  #at(path: string): string {
    if (this.#chroot === '') return path;
    return path === '/' ? this.#chroot : this.#chroot + path;
  }

  #from(serverPath: string): string {
    if (this.#chroot === '' || !serverPath.startsWith(this.#chroot)) return serverPath;
    return serverPath.slice(this.#chroot.length) || '/';
  }

  #setState(state: ZkState): void {
    if (this.#state === state) return;
    this.#state = state;
    for (const listener of [...this.#stateListeners]) listener(state);
  }

  /** The session is over (expired or closed): calls fail, watches hear it once, nothing reconnects. */
  #end(state: 'expired' | 'closed', error: ZkError): void {
    if (TERMINAL.has(this.#state)) return;
    this.#endedWith = error;
    this.#stop.abort(error);
    this.#setState(state);
    for (const waiter of [...this.#waiting]) waiter(error);
    this.#watches.endAll();
  }

  /** A new error (its own stack) saying why the session ended: closed, expired, or refused credentials. */
  #terminalError(): ZkError {
    const ended = this.#endedWith ?? new ZkError(Code.CONNECTION_LOSS, undefined, 'client closed');
    return new ZkError(ended.code, undefined, ended.detail, { cause: ended.cause });
  }

  /** The open connection, waiting for one until the deadline. */
  #connection(deadline: number, signal: AbortSignal | undefined, why: () => [string]): Promise<Connection> {
    if (TERMINAL.has(this.#state)) return Promise.reject(this.#terminalError());
    if (this.#conn) return Promise.resolve(this.#conn);
    return new Promise((resolve, reject) => {
      const finish = (ready: Connection | ZkError | Error) => {
        this.#waiting.delete(finish);
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (ready instanceof Connection) resolve(ready);
        else reject(ready);
      };
      const onAbort = () => finish(signal?.reason);
      const timer = setTimeout(
        () => finish(new ZkError(Code.CONNECTION_LOSS, undefined, why()[0])),
        Math.max(0, deadline - performance.now()),
      );
      this.#waiting.add(finish);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** One request: waits for a connection, sends once, and settles on reply, loss, deadline or abort. */
  #call<T>({ op, path, body, decode, opts = {}, watch, errorsInBody = false }: ZkCall<T>): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? this.#options.callTimeoutMs;
    const deadline = performance.now() + timeoutMs;
    const { signal } = opts;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const finish = (error: unknown, value?: T) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (error === undefined) resolve(value as T);
        else reject(error);
      };
      const onAbort = () => finish(signal?.reason ?? new Error('aborted'));
      // A late reply after this still arrives in order and is skipped (its pending entry stays queued).
      const timer = setTimeout(
        () => finish(new ZkError(Code.OPERATION_TIMEOUT, path, `no reply within ${timeoutMs} ms`)),
        timeoutMs,
      );
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      const register = (kind: WatchKind | undefined) => {
        if (watch && kind && path !== undefined) this.#watches.add(kind, path, watch.listener);
      };
      this.#connection(deadline, signal, () => [`not connected within ${timeoutMs} ms`]).then(
        (conn) => {
          if (done) return;
          conn.request(op, body, {
            reply: (err, r) => {
              if (done) return;
              if (err !== Code.OK && !(errorsInBody && r.remaining > 0)) {
                if (err === Code.NO_NODE) register(watch?.onNoNode);
                finish(new ZkError(err, path));
                return;
              }
              const value = decode(r); // a WireError here ends the connection (and fails this call)
              register(watch?.kind);
              finish(undefined, value);
            },
            lost: (error) => finish(error),
          });
        },
        (error: unknown) => finish(error),
      );
    });
  }

  /**
   * Connects, serves, reconnects: until the session expires or the client is closed. Each attempt
   * goes to the next server of the shuffled list, after the wait ReconnectPacing gives.
   */
  async #run(): Promise<void> {
    let next = 0;
    let wait = 0;
    /** A refusal in the current round, while no session was ever made: see ZkClientOptions.refused. */
    let refusal: { server: string; error: unknown } | undefined;
    while (!TERMINAL.has(this.#state)) {
      if (wait > 0) await this.#pause(wait); // close() ends it at once
      if (TERMINAL.has(this.#state)) return;
      wait = 0;
      const server = this.#servers[next % this.#servers.length] as { host: string; port: number };
      next += 1;
      let ended!: (reason: Error) => void;
      const closed = new Promise<Error>((resolve) => {
        ended = resolve;
      });
      try {
        const [conn, handshake] = await Connection.open(
          {
            ...server,
            sessionId: this.#sessionId,
            passwd: this.#passwd,
            lastZxid: this.#lastZxid,
            requestedTimeoutMs: this.#options.sessionTimeoutMs,
            connectTimeoutMs: Math.max(500, this.#options.sessionTimeoutMs / this.#servers.length),
            maxFrameBytes: this.#options.maxFrameBytes ?? MAX_FRAME_BYTES,
            ...(this.#options.tls ? { tls: this.#options.tls } : {}),
            signal: this.#stop.signal,
          },
          {
            event: (type, _state, serverPath) => {
              const kind = eventType(type);
              if (kind) this.#watches.fire(kind, this.#from(serverPath));
            },
            zxid: (zxid) => {
              if (zxid > this.#lastZxid) this.#lastZxid = zxid;
            },
            authFailed: () => {
              // The server ends the session's connection too; end ours at once rather than wait for it.
              this.#end('closed', new ZkError(Code.AUTH_FAILED));
              this.#conn?.destroy(new ZkError(Code.AUTH_FAILED));
            },
            closed: (reason) => ended(reason),
          },
        );
        this.#pacing.established();
        refusal = undefined;
        this.#onConnected(conn, handshake);
        await closed;
        this.#lastHeardAt = conn.lastHeardAt;
        if (this.#conn === conn) this.#conn = undefined;
        if (!TERMINAL.has(this.#state)) this.#setState('disconnected');
        // A connection the session gave up on (its server went silent while a heartbeat was due)
        // is followed at once: the wait would come out of the holder's lease, and the clients that
        // do this are spread by their own heartbeat schedules, not ended together by a server.
        wait = this.#droppedByCaller === conn ? 0 : this.#pacing.afterConnection(this.#sessionLeftMs());
        this.#droppedByCaller = undefined;
      } catch (error) {
        if (error instanceof ZkError && error.code === Code.SESSION_EXPIRED) {
          this.#end('expired', error);
          return;
        }
        this.#failedConnects += 1;
        if (this.#sessionId === 0n && this.#options.refused?.(error)) {
          refusal = { server: `${server.host}:${server.port}`, error };
        }
        if (next % this.#servers.length !== 0) continue;
        // A round of every server failed. Refused and never let in: retrying does not help.
        if (refusal) {
          const why = `the handshake with ${refusal.server} was refused: ${(refusal.error as Error)?.message}`;
          this.#end('closed', new ZkError(Code.AUTH_FAILED, undefined, why, { cause: refusal.error }));
          return;
        }
        // Otherwise back off before the next round.
        wait = this.#pacing.afterFailedRound(this.#sessionLeftMs());
      }
    }
  }

  /** How long the server may still keep the session: its timeout after we last heard from it. */
  #sessionLeftMs(): number {
    if (this.#lastHeardAt === undefined) return Number.POSITIVE_INFINITY; // no session yet
    return this.#timeoutMs - (performance.now() - this.#lastHeardAt);
  }

  #pause(ms: number): Promise<void> {
    const stop = this.#stop.signal;
    return new Promise((resolve) => {
      // Removed whichever comes first: one pause per reconnect round must not pile listeners on stop.
      const done = () => {
        clearTimeout(timer);
        stop.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      stop.addEventListener('abort', done, { once: true });
    });
  }

  #onConnected(conn: Connection, handshake: Handshake): void {
    if (TERMINAL.has(this.#state)) {
      // Closed while this connection was being made: end the session it resumed.
      conn.request(Op.closeSession, undefined, {
        reply: () => conn.destroy(new Error('closed')),
        lost: () => {},
      });
      return;
    }
    this.#sessionId = handshake.sessionId;
    this.#passwd = handshake.passwd;
    this.#timeoutMs = handshake.timeoutMs;
    for (const credential of this.#credentials) void this.#authenticate(conn, credential);
    this.#rearmWatches(conn);
    this.#conn = conn;
    this.#setState('connected');
    for (const waiter of [...this.#waiting]) waiter(conn);
  }

  /** Sends credential on conn unless it was sent there already; resolves when the server accepts it. */
  #authenticate(conn: Connection, credential: Credential): Promise<void> {
    let sent = this.#authSent.get(conn);
    if (!sent) {
      sent = new Map();
      this.#authSent.set(conn, sent);
    }
    let answer = sent.get(credential);
    if (!answer) {
      answer = conn.authenticate(credential.scheme, credential.auth);
      // Nobody may wait for it (the options' credentials): a refusal still ends the session (authFailed).
      answer.catch(() => undefined);
      sent.set(credential, answer);
    }
    return answer;
  }

  /**
   * A new connection has none of the session's watches: hand them over (SetWatches), from the last
   * zxid seen, in requests of at most SET_WATCHES_MAX_BYTES.
   */
  #rearmWatches(conn: Connection): void {
    const all = (['data', 'exist', 'child'] as const).flatMap((kind) =>
      this.#watches.paths(kind).map((path) => ({ kind, path: this.#at(path) })),
    );
    for (const batch of setWatchesBatches(all, SET_WATCHES_MAX_BYTES)) {
      const of = (kind: WatchKind) => batch.filter((b) => b.kind === kind).map((b) => b.path);
      conn.special(Xid.setWatches, Op.setWatches, (w) =>
        w
          .long(this.#lastZxid)
          .vector(of('data'), (x, p) => x.string(p))
          .vector(of('exist'), (x, p) => x.string(p))
          .vector(of('child'), (x, p) => x.string(p)),
      );
    }
  }
}

/** promise, or OPERATION_TIMEOUT at the deadline, or the signal's reason when it aborts first. */
function settleBy<T>(promise: Promise<T>, deadline: number, signal: AbortSignal | undefined): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      settle();
    };
    const onAbort = () => finish(() => reject(signal?.reason));
    const timer = setTimeout(
      () => finish(() => reject(new ZkError(Code.OPERATION_TIMEOUT, undefined, 'no answer in time'))),
      Math.max(0, deadline - performance.now()),
    );
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}
