import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A Redis Cluster of 3 masters and no replicas (Debian's redis-server and redis-cli) on free
 * loopback ports, in a temporary directory; stop() ends exactly these processes.
 */
export class RedisCluster {
  private constructor(
    readonly ports: number[],
    readonly dir: string,
    readonly children: ChildProcess[],
  ) {}

  /** host:port of every master. */
  get nodes(): string[] {
    return this.ports.map((port) => `127.0.0.1:${port}`);
  }

  static async start(): Promise<RedisCluster> {
    const dir = await mkdtemp(join(process.env.FENCEKIT_SERVERS_ROOT ?? tmpdir(), 'fencekit-redis-cluster-'));
    // The cluster bus needs a port of its own (default port + 10000 may be past 65535).
    const all = await freePorts(6);
    const [ports, busPorts] = [all.slice(0, 3), all.slice(3)];
    const children = ports.map((port, i) =>
      spawn(
        'redis-server',
        [
          ...['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'],
          ...['--cluster-enabled', 'yes', '--cluster-port', String(busPorts[i]), '--dir', dir],
          ...['--cluster-config-file', `nodes-${port}.conf`],
        ],
        { stdio: 'ignore' },
      ),
    );
    const cluster = new RedisCluster(ports, dir, children);
    try {
      for (const port of ports) await cluster.#until(`node ${port} answers`, () => cli(port, 'ping'), 'PONG');
      await run(
        'redis-cli',
        ['--cluster', 'create', ...cluster.nodes, '--cluster-replicas', '0', '--cluster-yes'],
        { timeout: 30_000 },
      );
      for (const port of ports) {
        await cluster.#until(
          `node ${port} sees the cluster ok`,
          () => cli(port, 'cluster', 'info'),
          'cluster_state:ok',
        );
      }
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }),
    );
    await rm(this.dir, { recursive: true, force: true });
  }

  async #until(what: string, ask: () => Promise<string>, expected: string): Promise<void> {
    const deadline = performance.now() + 20_000;
    for (;;) {
      const answer = await ask().catch((error: Error) => error.message);
      if (answer.includes(expected)) return;
      if (performance.now() > deadline)
        throw new Error(`redis cluster: ${what}: timed out; last answer: ${answer}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
    timeout: 5_000,
  });
  return stdout;
}

/** n ports the kernel gave out (all held until all are known), then closed for the servers. */
async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  for (let i = 0; i < n; i++) {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
  }
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  return ports;
}
