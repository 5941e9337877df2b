import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import type { LockLostError } from '../../src/index.js';
import { releaseStale } from '../../src/testing/helpers.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

/**
 * The etcd rows of the failure-model table: what a holder sees, and when, under each fault, on a
 * 3-member cluster (session TTL 3 s, callTimeoutMs 1 s). Each scenario prints its figures; the
 * assertion is the safety one: the holder's signal aborts before anyone else is granted. Opt-in
 * like the other backends' failure models (about a minute): FENCEKIT_FAILURE_MODEL=1.
 */
const TTL_MS = 3_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!process.env.FENCEKIT_FAILURE_MODEL)('etcd failure model (3-member cluster)', () => {
  let cluster: ServerGroup;
  let urls: string[];
  const providers: EtcdLockProvider[] = [];
  const open = (endpoints: string[]) => {
    const provider = new EtcdLockProvider({ endpoints, sessionTtlMs: TTL_MS, callTimeoutMs: 1_000 });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    cluster = await startServers('etcd', { size: 3, faults: true });
    urls = endpoint(cluster, 'ETCD_ENDPOINTS').split(',');
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await cluster?.stop();
  });

  const leaderIndex = async (among: string[]) => {
    for (const url of among) {
      const probe = new EtcdLockProvider({ endpoints: [url], callTimeoutMs: 1_000 });
      try {
        const status = await probe.client.maintenance.status();
        if (status.leader === status.header.member_id) return urls.indexOf(url);
      } catch {
        // a dead or paused member
      } finally {
        await probe.close();
      }
    }
    throw new Error('no leader');
  };

  /**
   * holder takes a name, waiter (on waiterEndpoints) queues for it, fault() runs; reports when the
   * holder's signal aborted (and why) and when the waiter was granted, both from the fault.
   */
  const scenario = async (
    title: string,
    holder: EtcdLockProvider,
    waiterEndpoints: string[],
    fault: () => Promise<void>,
    heal: () => Promise<void>,
  ) => {
    const waiter = open(waiterEndpoints);
    const key = uniqueKey('failure-model');
    const lock = await holder.acquire(key);
    let abortedAt: number | undefined;
    lock.signal.addEventListener('abort', () => {
      abortedAt = performance.now();
    });
    const waiting = waiter.acquire(key, { waitMs: 20_000 });
    await sleep(300);
    const faultAt = performance.now();
    await fault();
    const granted = await waiting.then(
      (l) => ({ at: performance.now(), lock: l }),
      (error: Error) => ({ at: performance.now(), error }),
    );
    await heal();
    const ms = (t: number | undefined) => (t === undefined ? 'never' : `${Math.round(t - faultAt)} ms`);
    const reason = lock.signal.aborted ? (lock.signal.reason as LockLostError).reason : 'not aborted';
    const grantedText =
      'lock' in granted ? ms(granted.at) : `failed (${granted.error.name}) at ${ms(granted.at)}`;
    console.log(
      `failure model, ${title}: holder signal ${ms(abortedAt)} (${reason}); next holder granted ${grantedText}`,
    );
    if ('lock' in granted) {
      expect(abortedAt, `${title}: the holder is told before another is granted`).toBeDefined();
      expect(abortedAt as number).toBeLessThanOrEqual(granted.at);
      await granted.lock.release();
    }
    await releaseStale(lock);
  };

  it('pause (SIGSTOP) of the follower the holder talks to, for 2 × TTL', async () => {
    const leader = await leaderIndex(urls);
    const follower = (leader + 1) % 3;
    const others = urls.filter((_, i) => i !== follower);
    const member = cluster.members[follower];
    await scenario(
      'follower pause',
      open([urls[follower] as string]),
      others,
      async () => member?.pause(),
      async () => member?.resume(),
    );
  }, 40_000);

  it('pause (SIGSTOP) of the leader, holder on every member, for 2 × TTL', async () => {
    const leader = await leaderIndex(urls);
    const member = cluster.members[leader];
    let resumeTimer: NodeJS.Timeout | undefined;
    await scenario(
      'leader pause (6 s)',
      open(urls),
      urls,
      async () => {
        await member?.pause();
        resumeTimer = setTimeout(() => void member?.resume(), 2 * TTL_MS);
      },
      async () => {
        clearTimeout(resumeTimer);
        await member?.resume();
      },
    );
  }, 40_000);

  it('partition of the holder (fault proxy, bytes held), healed after 2 × TTL', async () => {
    const proxies = await Promise.all(
      urls.map((url) => {
        const { hostname, port } = new URL(url);
        return FaultProxy.start({ host: hostname, port: Number(port) });
      }),
    );
    try {
      await scenario(
        'holder partitioned',
        open(proxies.map((p) => `http://${p.address}`)),
        urls,
        async () => {
          for (const p of proxies) p.setMode({ kind: 'partition' });
        },
        async () => {
          for (const p of proxies) p.setMode({ kind: 'pass' });
        },
      );
    } finally {
      await Promise.all(proxies.map((p) => p.close()));
    }
  }, 40_000);

  it('kill (SIGKILL) of the leader, holder on every member', async () => {
    const leader = await leaderIndex(urls);
    const holder = open(urls);
    const waiter = open(urls);
    const key = uniqueKey('failure-model-kill');
    const lock = await holder.acquire(key);
    const faultAt = performance.now();
    await cluster.members[leader]?.kill();
    // The holder keeps its lock if its keepalives reach the new leader in time.
    await sleep(2 * TTL_MS);
    const alive = urls.filter((_, i) => i !== leader);
    const info = await waiter.inspect(key);
    const abortedText = lock.signal.aborted
      ? `aborted (${(lock.signal.reason as LockLostError).reason})`
      : 'still live, key still its own';
    console.log(
      `failure model, leader kill: after ${Math.round(performance.now() - faultAt)} ms the holder's signal is ${abortedText}; ` +
        `inspect: holder token ${info?.holder?.fencingToken ?? 'none'} (${alive.length} members left)`,
    );
    if (!lock.signal.aborted) expect(info?.holder?.fencingToken).toBe(lock.fencingToken);
    await releaseStale(lock);
  }, 40_000);

  it('restart (SIGKILL, then the same command 1 s later) of a single-node etcd', async () => {
    const single = await startServers('etcd', { faults: true });
    let restarted: ChildProcess | undefined;
    try {
      const member = single.members[0];
      if (!member) throw new Error('no member');
      const [command, ...args] = readFileSync(`/proc/${member.pid}/cmdline`, 'utf8')
        .split('\0')
        .filter(Boolean);
      const endpoints = endpoint(single, 'ETCD_ENDPOINTS').split(',');
      const holder = open(endpoints);
      const waiter = open(endpoints);
      const key = uniqueKey('failure-model-restart');
      const lock = await holder.acquire(key);
      let abortedAt: number | undefined;
      lock.signal.addEventListener('abort', () => {
        abortedAt = performance.now();
      });
      const faultAt = performance.now();
      await member.kill();
      await sleep(1_000);
      restarted = spawn(command as string, args, { stdio: 'ignore', detached: true });
      await sleep(2 * TTL_MS);
      const info = await waiter.inspect(key);
      const state = lock.signal.aborted
        ? `aborted at ${Math.round((abortedAt as number) - faultAt)} ms (${(lock.signal.reason as LockLostError).reason})`
        : 'still live';
      console.log(
        `failure model, restart (1 s down): after ${Math.round(performance.now() - faultAt)} ms the holder's signal is ${state}; ` +
          `inspect: holder token ${info?.holder?.fencingToken ?? 'none'} (the holder's is ${lock.fencingToken})`,
      );
      if (!lock.signal.aborted) expect(info?.holder?.fencingToken).toBe(lock.fencingToken);
      await releaseStale(lock);
    } finally {
      if (restarted?.pid) process.kill(-restarted.pid, 'SIGKILL');
      await single.stop();
    }
  }, 40_000);
});
