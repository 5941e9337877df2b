import { spawn } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { HoldingProxy } from './holding-proxy.js';
import { startNative } from './native.js';
import type { ServerGroup } from './types.js';

/** A ZooKeeper ensemble whose every peer link (quorum and election) runs through a HoldingProxy. */
export interface PartitionableEnsemble {
  group: ServerGroup;
  /** Client address (host:port) of node i (0-based, in ZK_CONNECT order). */
  clientAddress(node: number): string;
  /** 'leader' | 'follower' as the node reports it (srvr). */
  mode(node: number): Promise<string>;
  /** Client connections node i has open (mntr), to find which node a client chose. */
  connections(node: number): Promise<number>;
  /** Holds every byte between node i and its peers, both ways, without a reset. */
  isolate(node: number): void;
  heal(node: number): void;
  /** SIGKILLs node i and waits until it is gone. */
  kill(node: number): Promise<void>;
  /** Starts node i again from its config and data, and waits until it serves. */
  restart(node: number): Promise<void>;
  pause(node: number): void;
  resume(node: number): void;
  stop(): Promise<void>;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, async () => {
      const server = net.createServer();
      await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
      return server;
    }),
  );
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((ok) => s.close(ok))));
  return ports;
}

/** A four-letter word's answer ('' when the node does not answer). */
function fourLetter(port: number, word: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(word));
    let text = '';
    socket.setTimeout(2_000, () => socket.destroy());
    socket.on('data', (chunk) => {
      text += chunk;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text));
  });
}

const srvrMode = async (port: number) =>
  /^Mode: (\w+)/m.exec(await fourLetter(port, 'srvr'))?.[1] ?? 'unknown';

/**
 * Starts 3 nodes; node i's config names peer j by a proxy of its own (one per ordered pair and
 * port), so that cutting node i's proxies, and its peers' proxies towards it, partitions exactly it.
 */
export async function startPartitionableEnsemble(tickMs: number): Promise<PartitionableEnsemble> {
  const nodes = 3;
  const ports = await freePorts(nodes * 3);
  const proxies = new Map<string, HoldingProxy[]>(); // "i:j" → [quorum, election], 1-based ids
  const view: string[] = [];
  for (let i = 1; i <= nodes; i++) {
    for (let j = 1; j <= nodes; j++) {
      if (i === j) continue;
      const [quorum, election] = await Promise.all(
        [1, 2].map((k) => HoldingProxy.start({ host: '127.0.0.1', port: ports[(j - 1) * 3 + k] as number })),
      );
      proxies.set(`${i}:${j}`, [quorum as HoldingProxy, election as HoldingProxy]);
      view.push(`${i}:${j}:${quorum?.port}:${election?.port}`);
    }
  }
  const all = [...proxies.values()].flat();
  let group: ServerGroup;
  try {
    group = await startNative('zookeeper', [String(nodes), String(tickMs)], {
      ZK_PORTS: ports.join(' '),
      ZK_PEER_VIEW: view.join(' '),
    });
  } catch (error) {
    await Promise.all(all.map((p) => p.close()));
    throw error;
  }
  const dir = group.vars.get('STATE_DIR') as string;
  const pidOf = (node: number) => Number(readFileSync(`${dir}/n${node + 1}.pid`, 'utf8').trim());
  const signal = (node: number, sig: NodeJS.Signals) => {
    try {
      process.kill(-pidOf(node), sig);
    } catch {}
  };
  const linksOf = (node: number) =>
    [...proxies].filter(([pair]) => pair.split(':').includes(String(node + 1))).flatMap(([, p]) => p);
  return {
    group,
    clientAddress: (node) => `127.0.0.1:${ports[node * 3]}`,
    mode: (node) => srvrMode(ports[node * 3] as number),
    connections: async (node) => {
      const text = await fourLetter(ports[node * 3] as number, 'mntr');
      return Number(/^zk_num_alive_connections\s+(\d+)/m.exec(text)?.[1] ?? Number.NaN);
    },
    isolate: (node) => {
      for (const proxy of linksOf(node)) proxy.hold();
    },
    heal: (node) => {
      for (const proxy of linksOf(node)) proxy.heal();
    },
    kill: async (node) => {
      const pid = pidOf(node);
      signal(node, 'SIGCONT');
      signal(node, 'SIGKILL');
      for (let i = 0; i < 200 && alive(pid); i++) await sleep(25);
    },
    restart: async (node) => {
      // As zookeeper.sh starts it: its own process group, output appended to its log.
      const log = openSync(`${dir}/n${node + 1}.log`, 'a');
      const child = spawn(
        'java',
        [
          '-Xmx256m',
          '-XX:+UseSerialGC',
          '-Dzookeeper.jmx.log4j.disable=true',
          '-cp',
          '/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar',
          'org.apache.zookeeper.server.quorum.QuorumPeerMain',
          `${dir}/n${node + 1}.cfg`,
        ],
        { detached: true, stdio: ['ignore', log, log] },
      );
      child.unref();
      writeFileSync(`${dir}/n${node + 1}.pid`, `${child.pid}\n`); // stop.sh ends it with the rest
      for (let i = 0; i < 600; i++) {
        if (['leader', 'follower'].includes(await srvrMode(ports[node * 3] as number))) return;
        await sleep(50);
      }
      throw new Error(`ZooKeeper node ${node + 1} did not serve again within 30 s`);
    },
    pause: (node) => signal(node, 'SIGSTOP'),
    resume: (node) => signal(node, 'SIGCONT'),
    stop: async () => {
      for (let node = 0; node < nodes; node++) signal(node, 'SIGCONT');
      await group.stop();
      await Promise.all(all.map((p) => p.close()));
    },
  };
}
