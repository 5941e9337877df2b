import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdElection } from '../../adapters/etcd/index.js';
import { ZkElection } from '../../adapters/zookeeper/index.js';
import { connect, createElection, LockElection, type LockProvider, runAsLeader } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import {
  type EveryBackend,
  endpoint,
  FaultProxy,
  type NetworkBackend,
  startEveryBackend,
} from '../servers/index.js';

const root = resolve(import.meta.dirname, '../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Backend = NetworkBackend;

describe('leader election on every real backend', () => {
  let servers: EveryBackend;
  const opened: LockProvider[] = [];
  const open = async (backend: Backend) => {
    const provider = await connect(servers.urls[backend], { sessionTtlMs: 1_000, sessionTimeoutMs: 2_000 });
    opened.push(provider);
    return provider;
  };
  /** A candidate that records when it is elected and leads until stop aborts. */
  const campaignUntilStopped = async (backend: Backend, name: string, stop: AbortSignal) => {
    const successor = { electedAt: 0, done: Promise.resolve() };
    successor.done = runAsLeader(
      await open(backend),
      name,
      async ({ signal }) => {
        successor.electedAt = performance.now();
        await new Promise((r) => signal.addEventListener('abort', r));
      },
      { signal: stop, ttlMs: 1_000, backoff: { initialMs: 10, maxMs: 50 } },
    );
    return successor;
  };
  beforeAll(async () => {
    servers = await startEveryBackend();
  });
  afterAll(async () => {
    await Promise.allSettled(opened.map((p) => p.close()));
    await servers?.stop();
  });

  it('createElection uses the native election where there is one', async () => {
    expect(createElection(await open('etcd'), 'x')).toBeInstanceOf(EtcdElection);
    expect(createElection(await open('zookeeper'), 'x')).toBeInstanceOf(ZkElection);
    expect(createElection(await open('redis'), 'x')).toBeInstanceOf(LockElection);
    expect(createElection(await open('postgres'), 'x')).toBeInstanceOf(LockElection);
  });

  it.each(['etcd', 'zookeeper', 'redis', 'postgres'] as Backend[])(
    '%s: five candidates, one live term at a time, terms rise strictly',
    async (backend) => {
      const name = uniqueKey(`leader-${backend}`);
      const stop = new AbortController();
      const live = new Set<AbortSignal>();
      const terms: bigint[] = [];
      const overlaps: string[] = [];
      const candidates = await Promise.all(Array.from({ length: 5 }, () => open(backend)));
      const runs = candidates.map((provider, i) =>
        runAsLeader(
          provider,
          name,
          async ({ signal, term }) => {
            for (const other of live) if (!other.aborted) overlaps.push(`term ${term} while another lived`);
            live.add(signal);
            terms.push(term);
            await sleep(30);
            live.delete(signal);
          },
          { value: `node-${i}`, signal: stop.signal, ttlMs: 2_000, backoff: { initialMs: 5, maxMs: 30 } },
        ),
      );
      await sleep(2_000);
      stop.abort();
      await Promise.all(runs);
      expect(overlaps).toEqual([]);
      expect(terms.length).toBeGreaterThan(5);
      for (let i = 1; i < terms.length; i++) expect(terms[i]).toBeGreaterThan(terms[i - 1] as bigint);
    },
  );

  it.each(['etcd', 'redis'] as Backend[])(
    '%s: SIGKILL of the leader’s process: the next leader within the lease + backoff',
    async (backend) => {
      const name = uniqueKey(`sigkill-${backend}`);
      const child = spawn(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import { connect, runAsLeader } from '${root}/dist/index.js';
           const p = await connect(${JSON.stringify(servers.urls[backend])}, { sessionTtlMs: 1000 });
           await runAsLeader(p, ${JSON.stringify(name)}, async ({ term }) => {
             console.log('leading ' + term);
             await new Promise(() => {});
           }, { ttlMs: 1000 });`,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      try {
        await once(child.stdout as NodeJS.ReadableStream, 'data');
        const stop = new AbortController();
        const successor = await campaignUntilStopped(backend, name, stop.signal);
        await sleep(200);
        const killedAt = performance.now();
        child.kill('SIGKILL');
        const deadline = killedAt + 5_000;
        while (!successor.electedAt && performance.now() < deadline) await sleep(10);
        stop.abort();
        await successor.done;
        expect(successor.electedAt).toBeGreaterThan(killedAt);
        expect(successor.electedAt - killedAt).toBeLessThan(1_000 + 1_000); // lease 1 s, + backoff and slack
      } finally {
        child.kill('SIGKILL');
      }
    },
  );

  it.each(['etcd', 'zookeeper', 'redis'] as Backend[])(
    '%s: a partitioned leader’s term signal aborts before a successor is elected',
    async (backend) => {
      const name = uniqueKey(`partition-${backend}`);
      const server = servers.groups[backend];
      const address =
        backend === 'etcd'
          ? endpoint(server, 'ETCD_ENDPOINTS').replace('http://', '')
          : backend === 'zookeeper'
            ? endpoint(server, 'ZK_CONNECT')
            : endpoint(server, 'REDIS_HOSTS');
      const [host = '', port = ''] = address.split(':');
      const proxy = await FaultProxy.start({ host, port: Number(port) });
      const scheme = { etcd: 'etcd', zookeeper: 'zk', redis: 'redis' }[
        backend as 'etcd' | 'zookeeper' | 'redis'
      ];
      const leaderProvider = await connect(`${scheme}://${proxy.address}`, {
        sessionTtlMs: 1_000,
        sessionTimeoutMs: 2_000,
        callTimeoutMs: 300,
      });
      opened.push(leaderProvider);
      const stop = new AbortController();
      let abortedAt = 0;
      let leading = false;
      const leader = runAsLeader(
        leaderProvider,
        name,
        async ({ signal }) => {
          leading = true;
          await new Promise((r) => signal.addEventListener('abort', r));
          abortedAt = abortedAt || performance.now();
        },
        { signal: stop.signal, ttlMs: 1_000 },
      );
      try {
        while (!leading) await sleep(5);
        const successor = await campaignUntilStopped(backend, name, stop.signal);
        proxy.setMode({ kind: 'blackhole' });
        const deadline = performance.now() + 8_000;
        while (!successor.electedAt && performance.now() < deadline) await sleep(10);
        expect(successor.electedAt).toBeGreaterThan(0);
        expect(abortedAt).toBeGreaterThan(0);
        expect(abortedAt).toBeLessThan(successor.electedAt);
        stop.abort();
        proxy.setMode({ kind: 'pass' });
        await Promise.all([leader, successor.done]);
      } finally {
        stop.abort();
        await proxy.close();
      }
    },
  );
});
