import net from 'node:net';

/**
 * A loopback TCP proxy whose cut is a real partition: while held, every byte (and every close) is
 * kept back both ways without a reset, and heal() delivers them in order. For links between servers
 * (ZooKeeper peers), where fault-proxy.ts's modes are per client connection.
 */
export class HoldingProxy {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  /** Held writes and closes, in arrival order, delivered on heal(). */
  #backlog: (() => void)[] = [];
  #held = false;

  private constructor(server: net.Server) {
    this.#server = server;
  }

  static async start(target: { host: string; port: number }): Promise<HoldingProxy> {
    if (!/^127\./.test(target.host)) throw new Error(`loopback targets only, not ${target.host}`);
    const server = net.createServer();
    const proxy = new HoldingProxy(server);
    server.on('connection', (client) => proxy.#accept(client, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  get held(): boolean {
    return this.#held;
  }

  hold(): void {
    this.#held = true;
  }

  heal(): void {
    this.#held = false;
    const backlog = this.#backlog;
    this.#backlog = [];
    for (const deliver of backlog) deliver();
  }

  async close(): Promise<void> {
    this.#backlog = [];
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket, target: { host: string; port: number }): void {
    const upstream = net.connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('error', () => undefined);
      socket.on('close', () => this.#sockets.delete(socket));
    }
    this.#pipe(client, upstream);
    this.#pipe(upstream, client);
  }

  /** Forwards data and the end of `from` to `to`, through the backlog while held. */
  #pipe(from: net.Socket, to: net.Socket): void {
    const pass = (deliver: () => void) => {
      if (this.#held || this.#backlog.length > 0) this.#backlog.push(deliver);
      else deliver();
    };
    from.on('data', (chunk: Buffer) => pass(() => !to.destroyed && to.write(chunk)));
    from.on('close', () => pass(() => to.destroy()));
  }
}
