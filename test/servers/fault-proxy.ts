import net from 'node:net';

export type ProxyMode =
  | { kind: 'pass' }
  /** Every chunk, each way, is delivered ms later (order kept). */
  | { kind: 'latency'; ms: number }
  /** Only one direction is late (late replies: 'toClient'; late requests: 'toServer'). */
  | { kind: 'delay'; direction: 'toClient' | 'toServer'; ms: number }
  /**
   * A real partition: connections stay open, nothing gets through either way, and every byte (and
   * close) is held. Healing (any other mode) delivers what was held, in order, as TCP would after
   * its retransmissions; `reset()` instead ends the held connections with an RST.
   */
  | { kind: 'partition' }
  /**
   * Nothing gets through and the bytes are dropped. No real network drops bytes inside a live TCP
   * connection, so healing resets every connection that lost bytes (no reply out of step): use it for
   * a cut-off that ends in a reset; `partition` for one that heals.
   */
  | { kind: 'blackhole' }
  /**
   * A server that is down: every open connection is reset, and every new one is reset as it is
   * accepted, so clients see their connection attempts fail (ECONNRESET) rather than hang.
   */
  | { kind: 'refuse' };

type Direction = 'toServer' | 'toClient';

interface Lane {
  to: net.Socket;
  /** When the last scheduled chunk is due (keeps order when delays change). */
  lastDue: number;
  /** Chunks held by a partition, delivered on heal. */
  held: Buffer[];
}

interface Link {
  client: net.Socket;
  upstream: net.Socket;
  lanes: Record<Direction, Lane>;
  /** A blackhole dropped bytes on it: it cannot be healed, only reset. */
  lostBytes: boolean;
  /** A side closed while traffic was held: the close is delivered on heal. */
  closedWhileHeld: boolean;
}

/**
 * A loopback TCP proxy for fault tests: clients connect to 127.0.0.1:port and reach the target
 * through it, while the test adds latency (both ways or one), partitions (bytes held), blackholes
 * (bytes dropped), or cuts every connection with a reset.
 * It only ever connects to the target it was given (a loopback server of the test's own).
 */
export class FaultProxy {
  readonly #server: net.Server;
  readonly #links = new Set<Link>();
  #mode: ProxyMode = { kind: 'pass' };
  /** When set: the client chunk it matches passes, the server's next answer is dropped and every connection reset. */
  #cutAfter: ((chunk: Buffer) => boolean) | undefined;
  #cutArmed = false;
  #afterCut: (() => void) | undefined;
  /** Connections accepted since start, for tests that count reconnects. */
  accepted = 0;

  private constructor(
    server: net.Server,
    readonly target: { host: string; port: number },
  ) {
    this.#server = server;
  }

  static async start(target: { host: string; port: number }): Promise<FaultProxy> {
    if (!/^127\.|^localhost$|^::1$/.test(target.host)) {
      throw new Error(`the fault proxy only forwards to loopback, not ${target.host}`);
    }
    const server = net.createServer();
    const proxy = new FaultProxy(server, target);
    server.on('connection', (client) => proxy.#accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  /** host:port for clients. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get openConnections(): number {
    return this.#links.size;
  }

  get mode(): ProxyMode {
    return this.#mode;
  }

  /**
   * Applies to open connections and new ones. Leaving a partition delivers what it held (then
   * the closes it held); leaving a blackhole resets the connections that lost bytes.
   */
  setMode(mode: ProxyMode): void {
    const previous = this.#mode;
    this.#mode = mode;
    if (mode.kind === 'refuse') {
      this.cutAll();
      return;
    }
    if (mode.kind === 'partition' || mode.kind === 'blackhole') return;
    for (const link of [...this.#links]) {
      if (previous.kind === 'partition') {
        for (const direction of ['toServer', 'toClient'] as const) {
          const lane = link.lanes[direction];
          for (const chunk of lane.held.splice(0)) this.#send(lane, direction, chunk);
        }
      }
      if (link.lostBytes) {
        this.#reset(link);
      } else if (link.closedWhileHeld || link.client.destroyed || link.upstream.destroyed) {
        this.#closeAfterFlush(link);
      }
    }
  }

  /** Ends every held or open connection with a reset (a partition that ends in RST, not delivery). */
  reset(): void {
    this.cutAll();
  }

  /**
   * Lost-reply fault: the first client chunk that `matches` reaches the server, but the server's
   * answer never comes back: it is dropped and every connection is reset. `afterCut` runs right
   * after the reset (before any reconnect), e.g. to keep the connection down with a blackhole.
   */
  cutAfterRequest(matches: (chunk: Buffer) => boolean, afterCut?: () => void): void {
    this.#cutAfter = matches;
    this.#cutArmed = false;
    this.#afterCut = afterCut;
  }

  /** Resets every open connection, both sides (TCP RST), as a crashed middlebox or server would. */
  cutAll(): void {
    for (const link of this.#links) this.#reset(link, false);
    this.#links.clear();
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #reset(link: Link, forget = true): void {
    link.client.resetAndDestroy();
    link.upstream.resetAndDestroy();
    if (forget) this.#links.delete(link);
  }

  #closeAfterFlush(link: Link): void {
    if (!this.#links.delete(link)) return;
    // Pending writes (delivered held bytes) go out before the FIN.
    for (const socket of [link.client, link.upstream]) if (!socket.destroyed) socket.end();
    setTimeout(() => {
      link.client.destroy();
      link.upstream.destroy();
    }, 1_000).unref();
  }

  #accept(client: net.Socket): void {
    this.accepted += 1;
    if (this.#mode.kind === 'refuse') {
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(this.target.port, this.target.host);
    const link: Link = {
      client,
      upstream,
      lanes: {
        toServer: { to: upstream, lastDue: 0, held: [] },
        toClient: { to: client, lastDue: 0, held: [] },
      },
      lostBytes: false,
      closedWhileHeld: false,
    };
    this.#links.add(link);
    const end = (closed: net.Socket) => {
      // Partitioned or blackholed: a close does not get through either; the other side stays
      // open, as across a real partition, until the mode changes back or cutAll().
      const kind = this.#mode.kind;
      if (kind === 'blackhole' || kind === 'partition') {
        link.closedWhileHeld = true;
        closed.destroy();
        return;
      }
      if (!this.#links.delete(link)) return;
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      socket.on('error', () => end(socket));
      socket.on('close', () => end(socket));
    }
    this.#forward(link, client, 'toServer');
    this.#forward(link, upstream, 'toClient');
  }

  #forward(link: Link, from: net.Socket, direction: Direction): void {
    const lane = link.lanes[direction];
    from.on('data', (chunk: Buffer) => {
      if (direction === 'toServer' && this.#cutAfter?.(chunk)) {
        this.#cutAfter = undefined;
        this.#cutArmed = true;
      } else if (direction === 'toClient' && this.#cutArmed) {
        this.#cutArmed = false;
        this.cutAll();
        const afterCut = this.#afterCut;
        this.#afterCut = undefined;
        afterCut?.();
        return;
      }
      const kind = this.#mode.kind;
      if (kind === 'blackhole') {
        link.lostBytes = true;
        return;
      }
      if (kind === 'partition') {
        lane.held.push(chunk);
        return;
      }
      this.#send(lane, direction, chunk);
    });
  }

  /** Delivers in order, each chunk no earlier than the mode's delay for its direction. */
  #send(lane: Lane, direction: Direction, chunk: Buffer): void {
    const mode = this.#mode;
    const delay =
      mode.kind === 'latency' ? mode.ms : mode.kind === 'delay' && mode.direction === direction ? mode.ms : 0;
    const now = performance.now();
    if (delay === 0 && lane.lastDue <= now) {
      if (!lane.to.destroyed) lane.to.write(chunk);
      return;
    }
    const due = Math.max(now + delay, lane.lastDue);
    lane.lastDue = due;
    setTimeout(() => {
      if (!lane.to.destroyed) lane.to.write(chunk);
    }, due - now);
  }
}
