import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import {
  type ConnectOptions,
  connect,
  createElection,
  type LockProvider,
  runAsLeader,
  runSingleton,
} from '../../src/index.js';
import { CliProcesses } from '../cli/cli-process.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';
import { etcdctl } from '../servers/processes.js';
import { RestartableRedis } from '../servers/redis-restartable.js';
import { Outputs } from '../unit/secret-outputs.js';
import { leaked } from '../unit/secret-urls.js';

/**
 * Servers that ask for a password: a wrong one, a malformed URL and the server's own refusal must
 * show neither the right password nor the wrong one in any output (the error, its stack and
 * causes inspected, events, log lines, metrics, the CLI's stdout and stderr), and the right one works.
 */

const RIGHT = 'Qx7/Fe?nc#e@Kz9%Vault';
const WRONG = 'Wr0ng/Pa?ss#w@rd';
/** Generous: a refused login answers at once, a slow machine must not turn a grant into a timeout. */
const PATIENT: ConnectOptions = { callTimeoutMs: 5_000, waitMs: 5_000, sessionTimeoutMs: 3_000 };
const enc = encodeURIComponent;

/** connect(), one tryAcquire and its release, close: everything seen, and whether it was granted. */
async function throughConnect(url: string, extra: ConnectOptions = {}) {
  return through((options) => connect(url, { ...options, ...extra }));
}

let runs = 0;

async function through(open: (options: ConnectOptions) => Promise<LockProvider> | LockProvider) {
  const out = new Outputs();
  let provider: LockProvider | undefined;
  let granted = false;
  try {
    provider = await open({ ...out.options(), ...PATIENT });
    out.listen(provider);
    // A name of its own: the runs of a test go at once, on one server.
    const lock = await provider.tryAcquire(`auth/${++runs}`).catch((error: unknown) => out.error(error));
    granted = lock?.held === true;
    if (lock) await lock.release();
  } catch (error) {
    out.error(error);
  } finally {
    await provider?.close().catch((error: unknown) => out.error(error));
  }
  await out.collectMetrics();
  return { out, granted };
}

async function throughStore(url: string) {
  const out = new Outputs();
  let ran = false;
  try {
    const store = await createIdempotencyStore(url, { callTimeoutMs: 5_000 });
    try {
      await store
        .run(`auth-${++runs}`, { amount: 1 }, async () => {
          ran = true;
          return 1;
        })
        .catch((error: unknown) => out.error(error));
    } finally {
      await store.close().catch((error: unknown) => out.error(error));
    }
  } catch (error) {
    out.error(error);
  }
  return { out, ran };
}

/** The cases whose outputs show either password, with the forms shown. */
function leaks(cases: Record<string, string>): string[] {
  return Object.entries(cases).flatMap(([name, text]) =>
    [RIGHT, WRONG].flatMap((secret) => {
      const found = leaked(text, secret);
      return found.length === 0 ? [] : [`${name}: ${found.join(', ')}`];
    }),
  );
}

const cli = new CliProcesses();
afterAll(() => cli.stop());

async function throughCli(url: string) {
  const out = await cli.run(['lock', `auth/cli-${++runs}`, '--url', url, '--wait', '5000', '--', 'true'], {
    env: { FENCEKIT_URL: '' },
  });
  return { text: `${out.stdout}\n${out.stderr}`, code: out.code };
}

describe('Redis with requirepass and with an ACL user', () => {
  let server: RestartableRedis | undefined;
  let host = '';
  beforeAll(async () => {
    server = await RestartableRedis.start({
      aof: false,
      args: ['--requirepass', RIGHT, '--user', 'app', 'on', `>${RIGHT}`, '~*', '&*', '+@all'],
      password: RIGHT,
    });
    host = `127.0.0.1:${server.port}`;
  }, 30_000);
  afterAll(() => server?.stop());

  it('a wrong password without ioredis’s ready check fails a waiting acquire at once, not after waitMs', async () => {
    // Without the ready check the connection is "ready" before the server judged the password:
    // that must not count as having reached the server (which would retry for the whole wait).
    const provider = new RedisLockProvider({
      callTimeoutMs: 1_000,
      redis: { host: '127.0.0.1', port: server?.port, password: WRONG, enableReadyCheck: false },
    });
    try {
      // ioredis reconnects after the refusal and then calls the connection ready.
      await new Promise((resolve) => provider.redis.once('ready', resolve));
      const waitMs = 60_000;
      const started = performance.now();
      const outcome = await provider.acquire('wrong-password', { waitMs }).then(
        () => 'granted',
        (error: { code?: string }) => error.code,
      );
      const tookMs = performance.now() - started;
      expect(outcome).toBe('AUTH_FAILED'); // the server refused the password: no retry helps
      expect(tookMs).toBeLessThan(waitMs / 4);
    } finally {
      await provider.close();
    }
  }, 90_000);

  it('every surface meets a wrong password as AUTH_FAILED: semaphores, elections, inspect, list', async () => {
    const provider = await connect(`redis://app:${enc(WRONG)}@${host}` as const, { callTimeoutMs: 5_000 });
    try {
      const election = createElection(provider, 'auth/surfaces');
      const semaphore = provider.semaphore('auth/surfaces', { limit: 2 });
      const uses: Record<string, () => Promise<unknown>> = {
        'semaphore acquire': () => semaphore.acquire({ waitMs: 60_000 }),
        'semaphore inspect': () => semaphore.inspect(),
        campaign: () => election.campaign('me', { waitMs: 60_000 }),
        leader: () => election.leader(),
        observe: () => election.observe()[Symbol.asyncIterator]().next(),
        inspect: () => provider.inspect('auth/surfaces'),
        list: () => provider.list(''),
      };
      const codes: Record<string, unknown> = {};
      for (const [name, use] of Object.entries(uses))
        codes[name] = await use().then(
          () => 'resolved',
          (error: { code?: string }) => error.code,
        );
      expect(codes).toEqual(Object.fromEntries(Object.keys(uses).map((name) => [name, 'AUTH_FAILED'])));
    } finally {
      await provider.close();
    }
  }, 60_000);

  it('the idempotency store meets a wrong password as AUTH_FAILED at once, and shows it nowhere', async () => {
    const store = await createIdempotencyStore(`redis://app:${enc(WRONG)}@${host}`, {
      callTimeoutMs: 60_000,
    });
    try {
      const started = performance.now();
      const error = await store
        .run('auth-store', { amount: 1 }, async () => 1)
        .then(
          () => undefined,
          (e: unknown) => e as { code?: string; message?: string },
        );
      expect(error?.code, error?.message).toBe('AUTH_FAILED');
      expect(error?.message).toMatch(/^redis at 127\.0\.0\.1:\d+: the user name or password was refused/);
      expect(performance.now() - started).toBeLessThan(30_000); // not retried for the call's deadline
      expect(leaks({ store: `${String(error)}\n${inspect(error, { depth: 8 })}` })).toEqual([]);
    } finally {
      await store.close();
    }
  }, 90_000);

  it('runAsLeader and runSingleton stop with AUTH_FAILED instead of retrying a refused password', async () => {
    const provider = await connect(`redis://app:${enc(WRONG)}@${host}`, { callTimeoutMs: 5_000 });
    const errors: unknown[] = [];
    const stop = new AbortController();
    try {
      const outcomes = await Promise.all(
        [
          () =>
            runAsLeader(provider, 'auth/leader', async () => undefined, {
              signal: stop.signal,
              onError: (e) => errors.push(e),
            }),
          () =>
            runSingleton(provider, 'auth/cron', async () => undefined, {
              everyMs: 50,
              signal: stop.signal,
              onError: (e) => errors.push(e),
            }),
        ].map((run) =>
          run().then(
            () => 'resolved',
            (error: { code?: string }) => error.code,
          ),
        ),
      );
      expect(outcomes).toEqual(['AUTH_FAILED', 'AUTH_FAILED']);
      expect(errors).toEqual([]);
    } finally {
      stop.abort();
      await provider.close();
    }
  }, 60_000);

  it('a wrong password, a malformed URL and an option password: refused, and shown nowhere', async () => {
    const [requirepass, aclUser, malformed, option, store, cliWrong, cliMalformed] = await Promise.all([
      throughConnect(`redis://:${enc(WRONG)}@${host}`),
      throughConnect(`redis://app:${enc(WRONG)}@${host}`),
      throughConnect(`redis://app:${RIGHT}@${host}`), // unescaped / ? # @: refused before connecting
      through(
        (o) =>
          new RedisLockProvider({ ...o, redis: { host: '127.0.0.1', port: server?.port, password: WRONG } }),
      ),
      throughStore(`redis://app:${enc(WRONG)}@${host}`),
      throughCli(`redis://app:${enc(WRONG)}@${host}`),
      throughCli(`redis://:${WRONG}@${host}`),
    ]);
    expect(
      leaks({
        requirepass: requirepass.out.all(),
        'ACL user': aclUser.out.all(),
        malformed: malformed.out.all(),
        option: option.out.all(),
        store: store.out.all(),
        'CLI wrong': cliWrong.text,
        'CLI malformed': cliMalformed.text,
      }),
    ).toEqual([]);
    for (const run of [requirepass, aclUser, malformed, option]) {
      expect(run.granted).toBe(false);
      expect(run.out.codes.length).toBeGreaterThan(0);
    }
    expect(store.ran).toBe(false);
    expect(cliWrong.code).not.toBe(0);
    expect(cliMalformed.code).toBe(64);
  }, 60_000);

  it('the right password, as requirepass and as the ACL user: granted, shown nowhere', async () => {
    const [requirepass, aclUser, store] = await Promise.all([
      throughConnect(`redis://:${enc(RIGHT)}@${host}`),
      throughConnect(`redis://app:${enc(RIGHT)}@${host}`),
      throughStore(`redis://app:${enc(RIGHT)}@${host}`),
    ]);
    expect(requirepass.granted).toBe(true);
    expect(aclUser.granted).toBe(true);
    expect(store.ran).toBe(true);
    expect(
      leaks({ requirepass: requirepass.out.all(), 'ACL user': aclUser.out.all(), store: store.out.all() }),
    ).toEqual([]);
  }, 60_000);
});

describe('PostgreSQL with a password user', () => {
  let server: ServerGroup | undefined;
  let host = '';
  beforeAll(async () => {
    // A private server: its pg_hba.conf is rewritten so that the app user must give a password.
    server = await startServers('postgres', { faults: true });
    const admin = endpoint(server, 'PG_URL');
    host = admin.replace(/^postgres:\/\/postgres@/, '').replace(/\/.*$/, '');
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    try {
      await client.query(`CREATE ROLE app LOGIN PASSWORD '${RIGHT.replace(/'/g, "''")}'`);
      await client.query('GRANT ALL ON SCHEMA public TO app');
      const dataDir = (await client.query('SHOW data_directory')).rows[0].data_directory as string;
      const hba = [
        'local all all trust',
        'host all postgres 127.0.0.1/32 trust',
        'host all all 127.0.0.1/32 scram-sha-256',
      ].join('\n');
      await client.query(
        `COPY (SELECT '${hba.replace(/\n/g, "' UNION ALL SELECT '")}') TO '${dataDir}/pg_hba.conf'`,
      );
      await client.query('SELECT pg_reload_conf()');
    } finally {
      await client.end();
    }
  }, 120_000);
  afterAll(() => server?.stop());

  it('a wrong password, a malformed URL and a pool password: refused, and shown nowhere', async () => {
    const [wrong, malformed, typo, option, store, cliWrong, cliTypo] = await Promise.all([
      throughConnect(`postgres://app:${enc(WRONG)}@${host}/postgres`),
      throughConnect(`postgres://app:${RIGHT}@${host}/postgres`),
      throughConnect(`postgres//app:${enc(RIGHT)}@${host}/postgres`),
      through(
        (o) =>
          new PostgresLockProvider({
            ...o,
            connectionString: `postgres://app@${host}/postgres`,
            pool: { password: WRONG },
          }),
      ),
      throughStore(`postgres://app:${enc(WRONG)}@${host}/postgres`),
      throughCli(`postgres://app:${enc(WRONG)}@${host}/postgres`),
      throughCli(`postgres//app:${RIGHT}@${host}/postgres`),
    ]);
    expect(
      leaks({
        wrong: wrong.out.all(),
        malformed: malformed.out.all(),
        typo: typo.out.all(),
        option: option.out.all(),
        store: store.out.all(),
        'CLI wrong': cliWrong.text,
        'CLI typo': cliTypo.text,
      }),
    ).toEqual([]);
    for (const run of [wrong, malformed, typo, option]) {
      expect(run.granted).toBe(false);
      expect(run.out.codes.length).toBeGreaterThan(0);
    }
    // The server's refusal is what the wrong password got (not a timeout, not a parse error).
    expect(wrong.out.all()).toMatch(/password authentication failed/);
    expect(store.ran).toBe(false);
    expect(cliWrong.code).not.toBe(0);
    expect(cliTypo.code).toBe(64);
  }, 60_000);

  it('the right password: granted, shown nowhere', async () => {
    const [right, store] = await Promise.all([
      throughConnect(`postgres://app:${enc(RIGHT)}@${host}/postgres`),
      throughStore(`postgres://app:${enc(RIGHT)}@${host}/postgres`),
    ]);
    expect(right.granted).toBe(true);
    expect(store.ran).toBe(true);
    expect(leaks({ right: right.out.all(), store: store.out.all() })).toEqual([]);
  }, 60_000);
});

describe('etcd with authentication enabled', () => {
  let server: ServerGroup | undefined;
  let endpoints = '';
  let host = '';
  beforeAll(async () => {
    server = await startServers('etcd', { faults: true });
    endpoints = endpoint(server, 'ETCD_ENDPOINTS');
    host = endpoints.replace('http://', '');
    for (const args of [
      ['user', 'add', 'root', '--new-user-password', RIGHT],
      ['user', 'grant-role', 'root', 'root'],
      ['auth', 'enable'],
    ]) {
      const { child } = etcdctl(endpoints, args);
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      if (code !== 0) throw new Error(`etcdctl ${args.slice(0, 2).join(' ')} exited with ${code}`);
    }
  }, 60_000);
  afterAll(() => server?.stop());

  it('a wrong password, a malformed URL and an auth option: refused, and shown nowhere', async () => {
    const [wrong, malformed, option, cliWrong] = await Promise.all([
      throughConnect(`etcd://root:${enc(WRONG)}@${host}`),
      throughConnect(`etcd://root:${RIGHT}@${host}`),
      through(
        (o) =>
          new EtcdLockProvider({ ...o, endpoints: [endpoints], auth: { username: 'root', password: WRONG } }),
      ),
      throughCli(`etcd://root:${enc(WRONG)}@${host}`),
    ]);
    expect(
      leaks({
        wrong: wrong.out.all(),
        malformed: malformed.out.all(),
        option: option.out.all(),
        'CLI wrong': cliWrong.text,
      }),
    ).toEqual([]);
    for (const run of [wrong, malformed, option]) {
      expect(run.granted).toBe(false);
      expect(run.out.codes.length).toBeGreaterThan(0);
    }
    expect(cliWrong.code).not.toBe(0);
  }, 60_000);

  it('the right password: granted, shown nowhere', async () => {
    const right = await throughConnect(`etcd://root:${enc(RIGHT)}@${host}`);
    expect(right.granted).toBe(true);
    expect(leaks({ right: right.out.all() })).toEqual([]);
  }, 60_000);
});

describe('ZooKeeper with digest credentials, rotated at run time (addDigest)', () => {
  let server: ServerGroup | undefined;
  let host = '';
  beforeAll(async () => {
    server = await startServers('zookeeper');
    host = endpoint(server, 'ZK_CONNECT');
  }, 60_000);
  afterAll(() => server?.stop());

  it('a URL credential and one added at run time, an option credential and one added: granted, shown nowhere', async () => {
    const [url, option] = await Promise.all([
      through(async (o) => {
        const provider = (await connect(
          `zookeeper://alice:${enc(RIGHT)}@${host}`,
          o,
        )) as ZooKeeperLockProvider;
        await provider.addDigest(`alice:${WRONG}`);
        return provider;
      }),
      through(async (o) => {
        const provider = new ZooKeeperLockProvider({
          ...o,
          connectString: host,
          digest: `alice:${RIGHT}`,
          creatorOnlyAcl: true,
        });
        await provider.addDigest(`bob:${WRONG}`);
        return provider;
      }),
    ]);
    expect(leaks({ url: url.out.all(), option: option.out.all() })).toEqual([]);
    expect(url.granted).toBe(true);
    expect(option.granted).toBe(true);
  }, 60_000);

  it('a credential without its user: refused, and shown nowhere', async () => {
    const malformed = await through(async (o) => {
      const provider = new ZooKeeperLockProvider({ ...o, connectString: host });
      await provider.addDigest(WRONG).catch(async (error: unknown) => {
        await provider.close();
        throw error;
      });
      return provider;
    });
    expect(malformed.out.codes).toEqual(['INVALID_ARGUMENT']);
    expect(malformed.granted).toBe(false);
    expect(leaks({ malformed: malformed.out.all() })).toEqual([]);
  }, 60_000);
});
