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
  /** Holds every byte between node i and its peers, both ways, without a reset. */
  isolate(node: number): void;
  heal(node: number): void;
  stop(): Promise<void>;
}

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

function srvrMode(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end('srvr'));
    let text = '';
    socket.setTimeout(2_000, () => socket.destroy());
    socket.on('data', (chunk) => {
      text += chunk;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(/^Mode: (\w+)/m.exec(text)?.[1] ?? 'unknown'));
  });
}

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
  const linksOf = (node: number) =>
    [...proxies].filter(([pair]) => pair.split(':').includes(String(node + 1))).flatMap(([, p]) => p);
  return {
    group,
    clientAddress: (node) => `127.0.0.1:${ports[node * 3]}`,
    mode: (node) => srvrMode(ports[node * 3] as number),
    isolate: (node) => {
      for (const proxy of linksOf(node)) proxy.hold();
    },
    heal: (node) => {
      for (const proxy of linksOf(node)) proxy.heal();
    },
    stop: async () => {
      await group.stop();
      await Promise.all(all.map((p) => p.close()));
    },
  };
}
