import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/**
 * One redis-server (Debian package) on a free loopback port that a test can kill (SIGKILL, as a
 * crash) and start again on the same port and data directory: with `aof`, every write is fsynced
 * to the append-only file before it is acknowledged (appendfsync always), so a restart keeps it;
 * without, a restart comes back empty. `args` are more redis-server options (`--requirepass`,
 * `--user`); `password` is what the start check then authenticates with (as `default`).
 */
export class RestartableRedis {
  #child: ChildProcess | undefined;

  private constructor(
    readonly port: number,
    readonly dir: string,
    readonly aof: boolean,
    readonly args: readonly string[],
    readonly password: string | undefined,
  ) {}

  static async start(options: {
    aof: boolean;
    args?: string[];
    password?: string;
  }): Promise<RestartableRedis> {
    const dir = await mkdtemp(join(process.env.FENCEKIT_SERVERS_ROOT ?? tmpdir(), 'fencekit-redis-restart-'));
    const server = new RestartableRedis(
      await freePort(),
      dir,
      options.aof,
      options.args ?? [],
      options.password,
    );
    await server.startAgain();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the server (again) and waits until it answers PING. */
  async startAgain(): Promise<void> {
    const persistence = this.aof
      ? ['--appendonly', 'yes', '--appendfsync', 'always']
      : ['--appendonly', 'no'];
    const child = spawn(
      'redis-server',
      [
        '--bind',
        '127.0.0.1',
        '--port',
        String(this.port),
        '--save',
        '',
        ...persistence,
        '--dir',
        this.dir,
        ...this.args,
      ],
      { stdio: 'ignore' },
    );
    this.#child = child;
    const client = new Redis(this.port, '127.0.0.1', {
      password: this.password,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => undefined);
    try {
      const deadline = performance.now() + 10_000;
      for (;;) {
        if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
        try {
          if (client.status !== 'ready') await client.connect();
          if ((await client.ping()) === 'PONG') return;
        } catch {
          if (performance.now() > deadline) throw new Error('redis-server did not answer within 10 s');
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    } finally {
      client.disconnect();
    }
  }

  /** SIGKILL, and waits until the process is gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** A port the kernel just gave out and took back: free for the server to bind. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
