import net from 'node:net';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { CreateMode, OPEN_ACL_UNSAFE } from '../../adapters/zookeeper/wire/ops.js';

/**
 * How long a ZooKeeper ensemble may take to elect a leader and serve on every member. Generous on
 * purpose: waiting stops at the event (every member serving a session that writes), and a loaded
 * 2-core CI machine (test files in parallel, JVMs starting, etcd/Redis/PostgreSQL beside them) can
 * take many seconds for an election; only a broken ensemble waits this long.
 */
export const ENSEMBLE_DEADLINE_MS = 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A four-letter word's answer ('' when the node does not answer within timeoutMs). */
export function fourLetter(port: number, word: string, timeoutMs = 2_000): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(word));
    let text = '';
    socket.setTimeout(timeoutMs, () => socket.destroy());
    socket.on('data', (chunk) => {
      text += chunk;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text));
  });
}

/** 'leader' | 'follower' | 'standalone' as the node reports it (srvr), 'unknown' when it does not serve. */
export const srvrMode = async (port: number) =>
  /^Mode: (\w+)/m.exec(await fourLetter(port, 'srvr'))?.[1] ?? 'unknown';

const portOf = (address: string) => {
  const port = Number(address.slice(address.lastIndexOf(':') + 1));
  if (!Number.isInteger(port) || port <= 0) throw new Error(`not a host:port ZooKeeper address: ${address}`);
  return port;
};

/** The roles of a settled ensemble: indexes into the addresses it was asked about. */
export interface EnsembleRoles {
  leader: number;
  followers: number[];
}

/**
 * A session through `address` that writes (an ephemeral node, committed by a quorum through the
 * leader) and closes. Resolves to the error when it cannot within timeoutMs.
 */
async function writesThrough(address: string, timeoutMs: number): Promise<unknown> {
  let client: ZkClient | undefined;
  try {
    client = await ZkClient.connect(
      // 4 s is within every tickTime's clamp the tests use (2..20 ticks of 200 ms or 1 s).
      { connectString: address, sessionTimeoutMs: 4_000, callTimeoutMs: timeoutMs },
      { timeoutMs },
    );
    await client.create(
      '/fencekit-ready-',
      Buffer.alloc(0),
      OPEN_ACL_UNSAFE,
      CreateMode.EPHEMERAL_SEQUENTIAL,
    );
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await client?.close().catch(() => undefined);
  }
}

/**
 * Waits until the ZooKeeper ensemble at `addresses` (plain 127.0.0.1 client ports) serves: one
 * member leads, every other follows, a session through each member writes, and the roles are the
 * same after those writes as before (no election in between). Waits for that event, not for a
 * fixed time; fails with what it last saw once deadlineMs has passed. A member expected down can
 * be left out by passing only the others' addresses (they must still include a quorum).
 */
export async function awaitEnsembleServing(
  addresses: readonly string[],
  deadlineMs = ENSEMBLE_DEADLINE_MS,
): Promise<EnsembleRoles> {
  const ports = addresses.map(portOf);
  const deadline = performance.now() + deadlineMs;
  const modesNow = () => Promise.all(ports.map((port) => srvrMode(port)));
  let last = 'no answer yet';
  while (performance.now() < deadline) {
    const modes = await modesNow();
    const leader = modes.indexOf('leader');
    const followers = modes.flatMap((mode, n) => (mode === 'follower' ? [n] : []));
    if (leader >= 0 && followers.length === modes.length - 1) {
      // Each call gets what is left of the deadline (at least a little, so a last try can pass).
      const left = Math.max(1_000, deadline - performance.now());
      const errors = await Promise.all(addresses.map((address) => writesThrough(address, left)));
      const failed = errors.findIndex((error) => error !== undefined);
      const after = await modesNow();
      if (failed < 0 && after.join() === modes.join()) return { leader, followers };
      last =
        failed >= 0
          ? `modes ${modes.join(', ')}, but no write through ${addresses[failed]}: ${String(errors[failed])}`
          : `modes changed during the check: ${modes.join(', ')} → ${after.join(', ')}`;
    } else {
      last = `modes ${modes.join(', ')}`;
    }
    await sleep(100);
  }
  throw new Error(
    `the ZooKeeper ensemble ${addresses.join(',')} did not serve (one leader, the rest following, a write through each) within ${deadlineMs} ms; last seen: ${last}`,
  );
}
