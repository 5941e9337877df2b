import { spawn } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  endpoint,
  FaultProxy,
  restartPostgres,
  type ServerGroup,
  startServers,
} from '../test/servers/index.js';
import { type PartitionableEnsemble, startPartitionableEnsemble } from '../test/servers/zk-peer-links.js';

export type TortureBackend = 'memory' | 'etcd' | 'zookeeper' | 'redis' | 'redlock' | 'postgres';

/**
 * The servers of one run: the lock backend (3 members where it has a cluster) and a PostgreSQL of
 * its own for the protected storage. Each worker reaches every member through its own fault
 * proxies, so one worker can be cut off or slowed while the others are not.
 */
export class TortureCluster {
  readonly #proxies = new Map<string, FaultProxy[]>();
  /** Current pid of each member, for kill/restart (a restarted member has a new pid). */
  readonly #pids: number[];

  private constructor(
    readonly backend: TortureBackend,
    readonly lockGroup: ServerGroup | undefined,
    readonly storageGroup: ServerGroup,
    readonly storageUrl: string,
    /** ZooKeeper: peer links through holding proxies, so one node can be cut off from its peers. */
    readonly ensemble?: PartitionableEnsemble,
  ) {
    this.#pids = lockGroup?.members.map((m) => m.pid) ?? [];
  }

  static async start(backend: TortureBackend): Promise<TortureCluster> {
    const kind = backend === 'redlock' ? 'redis' : backend;
    const size = backend === 'etcd' || backend === 'zookeeper' || backend === 'redlock' ? 3 : 1;
    const [lock, storage] = await Promise.allSettled([
      kind === 'memory'
        ? undefined
        : kind === 'zookeeper'
          ? startPartitionableEnsemble(200)
          : // PostgreSQL is killed and restarted (pgRestart): it must keep what it acknowledged.
            startServers(kind, {
              size,
              faults: true,
              ...(kind === 'postgres' ? { durableCommits: true } : {}),
            }),
      startServers('postgres', { faults: true }),
    ]);
    if (lock.status === 'rejected' || storage.status === 'rejected') {
      // One failed to start: stop the other, leave nothing running.
      if (lock.status === 'fulfilled') await lock.value?.stop();
      if (storage.status === 'fulfilled') await storage.value.stop();
      throw lock.status === 'rejected' ? lock.reason : (storage as PromiseRejectedResult).reason;
    }
    const ensemble = lock.value && 'isolate' in lock.value ? lock.value : undefined;
    const lockGroup = ensemble ? ensemble.group : (lock.value as ServerGroup | undefined);
    const storageGroup = storage.value;
    return new TortureCluster(backend, lockGroup, storageGroup, endpoint(storageGroup, 'PG_URL'), ensemble);
  }

  get members(): number {
    return this.#pids.length;
  }

  /** The connect() URL for one worker, through that worker's own proxies (made on first use). */
  async urlFor(worker: string, seed: number): Promise<string> {
    const group = this.lockGroup;
    if (!group) return `memory://torture-${seed}`;
    const proxies = await Promise.all(
      group.members.map((m) => {
        const [host = '', port = ''] = m.address.replace(/^https?:\/\//, '').split(':');
        return FaultProxy.start({ host, port: Number(port) });
      }),
    );
    this.#proxies.set(worker, proxies);
    const hosts = proxies.map((p) => p.address).join(',');
    switch (this.backend) {
      case 'etcd':
        return `etcd://${hosts}`;
      case 'zookeeper':
        return `zk://${hosts}`;
      case 'redis':
        return `redis://${hosts}`;
      case 'redlock':
        return `redlock://${hosts}`;
      default:
        return `postgres://postgres@${hosts}/postgres`;
    }
  }

  proxiesOf(worker: string): FaultProxy[] {
    return this.#proxies.get(worker) ?? [];
  }

  async dropWorker(worker: string): Promise<void> {
    const proxies = this.#proxies.get(worker) ?? [];
    this.#proxies.delete(worker);
    await Promise.all(proxies.map((p) => p.close()));
  }

  /** SIGKILL a member; `restart()` starts it again with the same command line, data and ports. */
  killMember(index: number): { restart: () => void } {
    const group = this.lockGroup;
    const member = group?.members[index];
    const pid = this.#pids[index];
    if (!group || !member || pid === undefined) throw new Error(`no member ${index}`);
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const env = Object.fromEntries(
      readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
    const stateDir = group.vars.get('STATE_DIR') ?? '';
    return {
      restart: () => {
        const [command = '', ...args] = argv;
        const log = openSync(join(stateDir, `${member.name}.restart.log`), 'a');
        const child = spawn(command, args, { env, detached: true, stdio: ['ignore', log, log] });
        child.unref();
        if (child.pid === undefined) return;
        this.#pids[index] = child.pid;
        // stop.sh ends what the pid files name: the restarted member is stopped with the rest.
        writeFileSync(join(stateDir, `${member.name}.pid`), `${child.pid}\n`);
      },
    };
  }

  pauseMember(index: number, paused: boolean): void {
    const pid = this.#pids[index];
    if (pid === undefined) return;
    try {
      process.kill(-pid, paused ? 'SIGSTOP' : 'SIGCONT');
    } catch {}
  }

  /** Redis: CLIENT PAUSE on one instance (every client's commands wait, renewals too). */
  async redisPause(index: number, ms: number): Promise<void> {
    const address = this.lockGroup?.members[index]?.address ?? '';
    const [host = '', port = ''] = address.split(':');
    const client = new Redis({ host, port: Number(port), lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await client.connect();
      await client.call('CLIENT', 'PAUSE', String(ms), 'ALL');
    } finally {
      client.disconnect();
    }
  }

  /** PostgreSQL: ends every session but ours on the lock server (the server frees their locks). */
  async pgTerminate(): Promise<number> {
    const url = this.lockGroup ? endpoint(this.lockGroup, 'PG_URL') : '';
    const client = new pg.Client({ connectionString: url, query_timeout: 3_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const result = await client.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND datname = current_database()`,
      );
      return result.rowCount ?? 0;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /**
   * PostgreSQL: SIGKILL of the lock server (postmaster and backends, as a crash), down `downMs`,
   * then started again on its data (crash recovery): every session and lock is gone, every
   * committed row (the idempotency store's records and token sequence) stays.
   */
  async pgRestart(downMs: number): Promise<void> {
    if (!this.lockGroup) throw new Error('pgRestart: no PostgreSQL lock server');
    await restartPostgres(this.lockGroup, downMs);
  }

  async stop(): Promise<void> {
    for (const worker of [...this.#proxies.keys()]) await this.dropWorker(worker);
    for (let i = 0; i < this.#pids.length; i++) this.pauseMember(i, false);
    await Promise.all([(this.ensemble ?? this.lockGroup)?.stop(), this.storageGroup.stop()]);
  }
}
