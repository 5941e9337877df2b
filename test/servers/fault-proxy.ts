import net from 'node:net';

export type ProxyMode =
  | { kind: 'pass' }
  /** Every chunk, each way, is delivered ms later (order kept). */
  | { kind: 'latency'; ms: number }
  /** Connections stay open but nothing gets through, either way: a silent network drop. */
  | { kind: 'blackhole' };

interface Link {
  client: net.Socket;
  upstream: net.Socket;
}

/**
 * A loopback TCP proxy for fault tests: clients connect to 127.0.0.1:port and reach the target
 * through it, while the test adds latency, blackholes traffic, or cuts every connection with a reset.
 * It only ever connects to the target it was given (a loopback server of the test's own).
 */
export class FaultProxy {
  readonly #server: net.Server;
  readonly #links = new Set<Link>();
  #mode: ProxyMode = { kind: 'pass' };
  /** When set: the client chunk it matches passes, the server's next answer is dropped and every connection reset. */
  #cutAfter: ((chunk: Buffer) => boolean) | undefined;
  #cutArmed = false;
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

  /** Applies to open connections and new ones. Leaving blackhole closes what closed meanwhile. */
  setMode(mode: ProxyMode): void {
    this.#mode = mode;
    if (mode.kind === 'blackhole') return;
    for (const link of this.#links) {
      if (link.client.destroyed || link.upstream.destroyed) {
        this.#links.delete(link);
        link.client.destroy();
        link.upstream.destroy();
      }
    }
  }

  /**
   * Lost-reply fault: the first client chunk that `matches` reaches the server, but the server's
   * answer never comes back: it is dropped and every connection is reset.
   */
  cutAfterRequest(matches: (chunk: Buffer) => boolean): void {
    this.#cutAfter = matches;
    this.#cutArmed = false;
  }

  /** Resets every open connection, both sides (TCP RST), as a crashed middlebox or server would. */
  cutAll(): void {
    for (const link of this.#links) {
      link.client.resetAndDestroy();
      link.upstream.resetAndDestroy();
    }
    this.#links.clear();
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    this.accepted += 1;
    const upstream = net.connect(this.target.port, this.target.host);
    const link = { client, upstream };
    this.#links.add(link);
    const end = (closed: net.Socket) => {
      // Blackholed: a close does not get through either; the other side stays open, as across a
      // real partition, until the mode changes back or cutAll().
      if (this.#mode.kind === 'blackhole') {
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
    this.#forward(client, upstream, true);
    this.#forward(upstream, client, false);
  }

  #forward(from: net.Socket, to: net.Socket, towardsServer: boolean): void {
    let lastDue = 0;
    from.on('data', (chunk: Buffer) => {
      if (towardsServer && this.#cutAfter?.(chunk)) {
        this.#cutAfter = undefined;
        this.#cutArmed = true;
      } else if (!towardsServer && this.#cutArmed) {
        this.#cutArmed = false;
        this.cutAll();
        return;
      }
      const mode = this.#mode;
      if (mode.kind === 'blackhole') return;
      if (mode.kind === 'pass' && lastDue <= performance.now()) {
        to.write(chunk);
        return;
      }
      // Latency (or draining what latency queued): deliver in order, each chunk no earlier than due.
      const now = performance.now();
      const due = Math.max(now + (mode.kind === 'latency' ? mode.ms : 0), lastDue);
      lastDue = due;
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, due - now);
    });
  }
}
