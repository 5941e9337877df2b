import { dockerAvailable, startContainer } from './containers.js';
import { startNative } from './native.js';
import type { ServerGroup, ServerKind } from './types.js';
import { awaitEnsembleServing } from './zk-quorum.js';

export { FaultProxy, type ProxyMode } from './fault-proxy.js';
export { restartPostgres } from './native.js';
export type { ServerGroup, ServerKind, ServerMember } from './types.js';

export interface ServerRequest {
  /** 1 = single server; 3 = etcd cluster / ZooKeeper ensemble / independent Redis instances. */
  size?: 1 | 3 | 5;
  /**
   * The test will kill, pause or partition servers: always start private ones (never the env's),
   * and natively, so that every member is a local process it can signal.
   */
  faults?: boolean;
  /** ZooKeeper tickTime in ms (session timeouts are clamped to 2..20 ticks; a private native server). Default 200. */
  tickMs?: number;
  /**
   * ZooKeeper's znode.container.checkIntervalMs, how often the leader removes empty container
   * nodes (a private native server). Default: the server's, 60 s.
   */
  containerCheckMs?: number;
  /** PostgreSQL's max_connections (a private native server). Default 200. */
  maxConnections?: number;
  /**
   * PostgreSQL: synchronous commit (a private native server), for tests that kill the server and
   * count on what it acknowledged. Default off (speed).
   */
  durableCommits?: boolean;
}

/** The env variables that name servers the caller already runs, per kind and size. */
const ENV: Record<ServerKind, { single: string; cluster: string; varName: string }> = {
  etcd: {
    single: 'FENCEKIT_ETCD_ENDPOINTS',
    cluster: 'FENCEKIT_ETCD_CLUSTER_ENDPOINTS',
    varName: 'ETCD_ENDPOINTS',
  },
  zookeeper: {
    single: 'FENCEKIT_ZK_CONNECT',
    cluster: 'FENCEKIT_ZK_ENSEMBLE_CONNECT',
    varName: 'ZK_CONNECT',
  },
  redis: { single: 'FENCEKIT_REDIS_URL', cluster: 'FENCEKIT_REDLOCK_HOSTS', varName: 'REDIS_URL' },
  postgres: { single: 'FENCEKIT_PG_URL', cluster: 'FENCEKIT_PG_URL', varName: 'PG_URL' },
};

/**
 * Servers for one test file: the caller's (env variables) first; else a container when a Docker
 * engine answers; else real servers from Debian packages started by docker/native. Call stop() in
 * afterAll: it ends only what this call started.
 */
export async function startServers(kind: ServerKind, request: ServerRequest = {}): Promise<ServerGroup> {
  const size = request.size ?? 1;
  const fromEnv = process.env[size === 1 ? ENV[kind].single : ENV[kind].cluster];
  const privateServer =
    request.faults ||
    request.tickMs !== undefined ||
    request.maxConnections !== undefined ||
    request.durableCommits ||
    request.containerCheckMs !== undefined;
  if (fromEnv && !privateServer) {
    const vars = new Map([[ENV[kind].varName, fromEnv]]);
    if (kind === 'redis') vars.set('REDIS_HOSTS', fromEnv.replace(/^redis:\/\//, ''));
    return { kind, origin: 'env', vars, members: [], startMs: 0, stop: async () => {} };
  }
  if (size === 1 && !privateServer && (await dockerAvailable())) return startContainer(kind);
  const args =
    kind === 'zookeeper'
      ? [String(size), String(request.tickMs ?? 200)]
      : kind === 'postgres'
        ? []
        : [String(size)];
  const env: Record<string, string> = {
    ...(request.maxConnections === undefined ? {} : { PG_MAX_CONNECTIONS: String(request.maxConnections) }),
    ...(request.durableCommits ? { PG_SYNCHRONOUS_COMMIT: 'on' } : {}),
    ...(request.containerCheckMs === undefined
      ? {}
      : { ZK_CONTAINER_CHECK_MS: String(request.containerCheckMs) }),
  };
  if (kind !== 'zookeeper' || size === 1) return startNative(kind, args, env);
  // An ensemble's 9 ports are free when the script asks for them, but a parallel test file can take
  // one before its JVM binds it: that node exits at once (zookeeper.sh fails fast), start again.
  for (let attempt = 1; ; attempt++) {
    let group: ServerGroup;
    try {
      group = await startNative(kind, args, env);
    } catch (error) {
      if (attempt < 3 && /Address already in use/.test(String(error))) continue;
      throw error;
    }
    // zookeeper.sh saw each member's srvr in turn; under load the election may still be under way
    // (or start again): hand the ensemble over once it serves writes through every member.
    try {
      await awaitEnsembleServing(endpoint(group, 'ZK_CONNECT').split(','));
      return group;
    } catch (error) {
      await group.stop();
      throw error;
    }
  }
}

/**
 * Starts several groups at once; if one fails, stops those that started before throwing, so a
 * failed start leaves no server running for the rest of the run.
 */
export async function startAll<const T extends readonly Promise<ServerGroup>[]>(
  starts: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.allSettled(settled.map((s) => (s.status === 'fulfilled' ? s.value.stop() : undefined)));
    throw failed.reason;
  }
  return settled.map((s) => (s as PromiseFulfilledResult<ServerGroup>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

/** The value a start script printed, or a clear failure naming what is missing. */
export function endpoint(group: ServerGroup, name: string): string {
  const value = group.vars.get(name);
  if (!value) throw new Error(`${group.kind} servers (${group.origin}) did not provide ${name}`);
  return value;
}

export type NetworkBackend = 'etcd' | 'zookeeper' | 'redis' | 'postgres';

/** One single server of each network backend, with the `connect()` URL that reaches each. */
export interface EveryBackend {
  groups: Record<NetworkBackend, ServerGroup>;
  urls: Record<NetworkBackend, string>;
  stop(): Promise<void>;
}

/** Starts one server of every network backend at once (for tests that run a story on each). */
export async function startEveryBackend(): Promise<EveryBackend> {
  const [etcd, zookeeper, redis, postgres] = await startAll([
    startServers('etcd'),
    startServers('zookeeper'),
    startServers('redis'),
    startServers('postgres'),
  ]);
  const groups = { etcd, zookeeper, redis, postgres };
  return {
    groups,
    urls: {
      etcd: `etcd://${endpoint(etcd, 'ETCD_ENDPOINTS').replace(/http:\/\//g, '')}`,
      zookeeper: `zk://${endpoint(zookeeper, 'ZK_CONNECT')}`,
      redis: endpoint(redis, 'REDIS_URL'),
      postgres: endpoint(postgres, 'PG_URL'),
    },
    stop: async () => {
      await Promise.all(Object.values(groups).map((group) => group.stop()));
    },
  };
}
