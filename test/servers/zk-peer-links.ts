import { spawn } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { HoldingProxy } from './holding-proxy.js';
import { startNative } from './native.js';
import type { ServerGroup } from './types.js';
import {
  awaitEnsembleServing,
  ENSEMBLE_DEADLINE_MS,
  type EnsembleRoles,
  fourLetter,
  srvrMode,
} from './zk-quorum.js';

/** A ZooKeeper ensemble whose every peer link (quorum and election) runs through a HoldingProxy. */
export interface PartitionableEnsemble {
  group: ServerGroup;
  /** Client address (host:port) of node i (0-based, in ZK_CONNECT order); throws for no such node. */
  clientAddress(node: number): string;
  /**
   * Waits until the ensemble serves (one leader, two followers, a write through each node, no
   * election meanwhile) and returns the roles; throws after a generous deadline. Call it before a
   * case that picks nodes by role: a previous case's fault may have sent a node through an election.
   */
  settled(): Promise<EnsembleRoles>;
  /** 'leader' | 'follower' as the node reports it (srvr). */
  mode(node: number): Promise<string>;
  /** Client connections node i has open (mntr), to find which node a client chose. */
  connections(node: number): Promise<number>;
  /** Holds every byte between node i and its peers, both ways, without a reset. */
  isolate(node: number): void;
  heal(node: number): void;
  /** SIGKILLs node i and waits until it is gone (throws if it is not, after a generous deadline). */
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

/** Free ports, held until release(): what else this process opens meanwhile cannot take them. */
async function freePorts(count: number): Promise<{ ports: number[]; release(): Promise<void> }> {
  const servers = await Promise.all(
    Array.from({ length: count }, async () => {
      const server = net.createServer();
      await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
      return server;
    }),
  );
  return {
    ports: servers.map((s) => (s.address() as net.AddressInfo).port),
    release: async () => {
      await Promise.all(servers.map((s) => new Promise((ok) => s.close(ok))));
    },
  };
}

/**
 * Starts 3 nodes; node i's config names peer j by a proxy of its own (one per ordered pair and
 * port), so that cutting node i's proxies, and its peers' proxies towards it, partitions exactly it.
 */
export async function startPartitionableEnsemble(tickMs: number): Promise<PartitionableEnsemble> {
  // The client, quorum and election ports are free when asked for, but another process on the
  // machine (a parallel test file's server or client) can take one before the JVM binds it: the
  // node exits at once (zookeeper.sh fails fast then), and we start again on other ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startPartitionableEnsembleOnce(tickMs);
    } catch (error) {
      if (attempt >= 3 || !/Address already in use/.test(String(error))) throw error;
    }
  }
}

async function startPartitionableEnsembleOnce(tickMs: number): Promise<PartitionableEnsemble> {
  const nodes = 3;
  const held = await freePorts(nodes * 3);
  const { ports } = held;
  const proxies = new Map<string, HoldingProxy[]>(); // "i:j" → [quorum, election], 1-based ids
  const view: string[] = [];
  try {
    for (let i = 1; i <= nodes; i++) {
      for (let j = 1; j <= nodes; j++) {
        if (i === j) continue;
        const [quorum, election] = await Promise.all(
          [1, 2].map((k) =>
            HoldingProxy.start({ host: '127.0.0.1', port: ports[(j - 1) * 3 + k] as number }),
          ),
        );
        proxies.set(`${i}:${j}`, [quorum as HoldingProxy, election as HoldingProxy]);
        view.push(`${i}:${j}:${quorum?.port}:${election?.port}`);
      }
    }
  } catch (error) {
    await Promise.all([...proxies.values()].flat().map((p) => p.close()));
    throw error;
  } finally {
    // Held while the proxies took their own ports, so that none of them took a node's.
    await held.release();
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
  const addresses = ports.filter((_, k) => k % 3 === 0).map((port) => `127.0.0.1:${port}`);
  // zookeeper.sh saw each node's srvr in turn; under load the election may still be under way (or
  // start again) then: hand the ensemble over once it serves writes through every node.
  try {
    await awaitEnsembleServing(addresses);
  } catch (error) {
    await group.stop();
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
  /** Node i's client port; a clear error, not "127.0.0.1:undefined", for a node that is not one (a role not found). */
  const clientPort = (node: number) => {
    if (!Number.isInteger(node) || node < 0 || node >= nodes)
      throw new Error(
        `no ZooKeeper node ${node} in this ensemble (nodes 0..${nodes - 1}): was a role not found?`,
      );
    return ports[node * 3] as number;
  };
  const linksOf = (node: number) =>
    [...proxies].filter(([pair]) => pair.split(':').includes(String(node + 1))).flatMap(([, p]) => p);
  return {
    group,
    clientAddress: (node) => `127.0.0.1:${clientPort(node)}`,
    settled: () => awaitEnsembleServing(addresses),
    mode: (node) => srvrMode(clientPort(node)),
    connections: async (node) => {
      const text = await fourLetter(clientPort(node), 'mntr');
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
      const deadline = performance.now() + ENSEMBLE_DEADLINE_MS;
      while (alive(pid)) {
        if (performance.now() > deadline)
          throw new Error(
            `ZooKeeper node ${node + 1} (pid ${pid}) did not exit within ${ENSEMBLE_DEADLINE_MS} ms`,
          );
        await sleep(25);
      }
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
      const deadline = performance.now() + ENSEMBLE_DEADLINE_MS;
      while (performance.now() < deadline) {
        if (['leader', 'follower'].includes(await srvrMode(clientPort(node)))) return;
        await sleep(50);
      }
      throw new Error(`ZooKeeper node ${node + 1} did not serve again within ${ENSEMBLE_DEADLINE_MS} ms`);
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
