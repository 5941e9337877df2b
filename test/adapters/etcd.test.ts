import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider, namePrefix } from '../../adapters/etcd/index.js';
import { connect, type LockLostError } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';
import { etcdctl, stopChild } from '../servers/processes.js';
import { contendThroughLeaderKill, expectOneWakeupPerRelease } from './scenarios.js';

const root = resolve(import.meta.dirname, '../..');

describe('etcd adapter on a real etcd', () => {
  const etcd = etcdFixture({ sessionTtlMs: 2_000 });
  const { open, throughProxy } = etcd;

  it('connect("etcd://…") opens an etcd provider with the URL’s namespace', async () => {
    const url = `etcd://${etcd.endpoints.replace(/http:\/\//g, '')}?namespace=app1/`;
    const provider = await connect(url);
    try {
      expect(provider.backend).toBe('etcd');
      const lock = await provider.acquire('jobs/nightly');
      const raw = await (provider as EtcdLockProvider).client.getAll().prefix('app1/jobs%2Fnightly/').keys();
      expect(raw).toHaveLength(1);
      expect(raw[0]).toMatch(/^app1\/jobs%2Fnightly\/[0-9a-f]+$/);
      await lock.release();
    } finally {
      await provider.close();
    }
  });

  it("inspect counts this provider's requests waiting in process behind its own key", async () => {
    const [holderSide, waiting] = [open(), open()];
    const key = uniqueKey('local-waiters');
    const lock = await holderSide.acquire(key);
    const first = waiting.acquire(key, { waitMs: 20_000 });
    await eventually('one key waits in etcd', async () => (await holderSide.inspect(key))?.waiters === 1);
    const second = waiting.acquire(key, { waitMs: 20_000 });
    // The second waits in its provider's line: etcd still holds one waiting key, its provider says 2.
    await eventually('the provider counts its line', async () => (await waiting.inspect(key))?.waiters === 2);
    expect((await holderSide.inspect(key))?.waiters).toBe(1);
    await lock.release();
    await (await first).release();
    await (await second).release();
  });

  it('excludes `etcdctl lock` and is excluded by it, in both directions', async () => {
    const name = `interop-${crypto.randomUUID()}`;
    const provider = open();
    // etcdctl holds → we cannot; it releases → we can.
    const held = etcdctl(etcd.endpoints, ['lock', name]);
    await eventually('etcdctl holds the lock', async () => held.lines.some((l) => l.startsWith(`${name}/`)));
    expect(await provider.tryAcquire(name)).toBeNull();
    const info = await provider.inspect(name);
    expect(info?.holder?.owner).toBeUndefined(); // etcdctl stores an empty value
    const waiting = provider.acquire(name, { waitMs: 10_000 });
    await stopChild(held.child);
    const lock = await waiting;
    expect(lock.held).toBe(true);
    // We hold → etcdctl waits; we release → etcdctl gets it.
    const second = etcdctl(etcd.endpoints, ['lock', name, 'echo', 'etcdctl-ran']);
    await new Promise((r) => setTimeout(r, 500));
    expect(second.lines).not.toContain('etcdctl-ran');
    await lock.release();
    await once(second.child, 'exit');
    expect(second.lines).toContain('etcdctl-ran');
  });

  it('guardedTxn commits only while the lock is held: a stale holder’s write is rejected', async () => {
    await throughProxy(async (proxy) => {
      const stale = open({ endpoints: [`http://${proxy.address}`], callTimeoutMs: 500 });
      const fresh = open();
      const key = uniqueKey('guarded-txn');
      const a = await stale.acquire(key);
      expect((await stale.guardedTxn(a, stale.client.put('balance').value('A1'))).committed).toBe(true);
      proxy.setMode({ kind: 'blackhole' });
      const b = await fresh.acquire(key, { waitMs: 10_000 }); // after A's session expired on the server
      expect(a.signal.aborted).toBe(true);
      expect((await fresh.guardedTxn(b, fresh.client.put('balance').value('B1'))).committed).toBe(true);
      proxy.setMode({ kind: 'pass' });
      proxy.cutAll();
      let result: { committed: boolean } | undefined;
      await eventually('A reaches etcd again', async () => {
        // Only an outage is waited out; any other failure is the test's.
        result = await stale
          .guardedTxn(a, stale.client.put('balance').value('A2'))
          .catch((error: { code?: string }) => {
            if (error?.code !== 'BACKEND_UNAVAILABLE') throw error;
            return undefined;
          });
        return result !== undefined;
      });
      expect(result?.committed).toBe(false);
      expect(await fresh.client.get('balance').string()).toBe('B1');
      await b.release();
    });
  });

  it('a waiter whose session expired while it waited is not granted; the one behind it is', async () => {
    await throughProxy(async (proxy) => {
      const [a, c] = [open(), open()];
      const b = open({ endpoints: [`http://${proxy.address}`], callTimeoutMs: 500 });
      const key = uniqueKey('expired-waiter');
      const lock = await a.acquire(key);
      // B's wait ends soon after its session: the provider rides through outages within waitMs.
      const waitingB = b.acquire(key, { waitMs: 4_000 });
      await eventually('B queued', async () => (await a.inspect(key))?.waiters === 1);
      const waitingC = c.acquire(key, { waitMs: 20_000 });
      await eventually('C queued', async () => (await a.inspect(key))?.waiters === 2);
      proxy.setMode({ kind: 'blackhole' }); // B's keepalives stop: its lease expires on the server
      await expect(waitingB).rejects.toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
      await eventually('B’s key expired', async () => (await a.inspect(key))?.waiters === 1, 5_000);
      await lock.release();
      const granted = await waitingC;
      expect(granted.fencingToken).toBeGreaterThan(lock.fencingToken);
      await granted.release();
    });
  });

  it('a waiter survives a reset connection: a release made while it reconnects still reaches it', async () => {
    await throughProxy(async (proxy) => {
      const a = open();
      const b = open({ endpoints: [`http://${proxy.address}`], sessionTtlMs: 5_000 });
      const key = uniqueKey('reconnect');
      const lock = await a.acquire(key);
      const waiting = b.acquire(key, { waitMs: 30_000 });
      waiting.catch(() => undefined); // awaited below; a failure meanwhile is not unhandled
      await eventually('B queued', async () => (await a.inspect(key))?.waiters === 1, 20_000);
      await new Promise((r) => setTimeout(r, 200)); // B is watching A's key now
      proxy.cutAll(); // every connection of B reset (its watch stream too)
      await lock.release();
      const granted = await waiting;
      expect(granted.fencingToken).toBeGreaterThan(lock.fencingToken);
      expect(granted.signal.aborted).toBe(false);
      await granted.release();
    });
  });

  it('a waiter whose watch start revision was compacted reads the queue again and is still granted', async () => {
    await throughProxy(async (proxy) => {
      const a = open();
      const b = open({ endpoints: [`http://${proxy.address}`], sessionTtlMs: 10_000, callTimeoutMs: 5_000 });
      const key = uniqueKey('compacted');
      const lock = await a.acquire(key);
      await (await b.acquire(uniqueKey('warm-up'))).release(); // B's session exists before the delay
      // Compacts past a start revision: writes until the revision is beyond it, then compacts there.
      const compactPast = async (revision: bigint) => {
        for (;;) {
          const { header } = await a.client.put(`${key}-compaction-marker`).value('x').exec();
          if (BigInt(header.revision) > revision) {
            await a.client.kv.compact({ revision: header.revision, physical: true });
            return;
          }
        }
      };
      // B's watches that start at a revision (the queue turn's; not the provider's deletion watch).
      let watches = 0;
      let compacted: Promise<void> | undefined;
      const watch = b.client.watch.bind(b.client);
      b.client.watch = () => {
        const builder = watch();
        const startRevision = builder.startRevision.bind(builder);
        builder.startRevision = (revision: string) => {
          watches += 1;
          // B has read the queue and is creating its watch, whose request needs 400 ms through the
          // proxy to reach etcd: the compaction (direct, a few ms) lands before it, whatever the load.
          compacted ??= compactPast(BigInt(revision));
          return startRevision(revision);
        };
        return builder;
      };
      proxy.setMode({ kind: 'latency', ms: 400 });
      const waiting = b.acquire(key, { waitMs: 20_000 });
      await eventually('B creates its watch', async () => compacted !== undefined);
      await compacted;
      // B's watch was refused as compacted: B reads the queue again and watches from there.
      await eventually('B watches again after a new read', async () => watches >= 2, 20_000);
      proxy.setMode({ kind: 'pass' });
      await lock.release();
      const granted = await waiting;
      expect(granted.fencingToken).toBeGreaterThan(lock.fencingToken);
      expect(watches, 'the compacted watch was replaced after a new read').toBeGreaterThanOrEqual(2);
      await granted.release();
    });
  });

  it('a revoked session aborts its locks at once (the delete is seen by the session’s watch); later acquires get a new one', async () => {
    // Keepalives every 5 s: a loss seen within 1.5 s came by the watch, even on a slow machine.
    const provider = open({ sessionTtlMs: 15_000 });
    const key = uniqueKey('revoked');
    const lock = await provider.acquire(key);
    // Revoke our session's lease behind the provider's back, as an operator (or etcdctl) could.
    const [kv] = (await provider.client.getAll().prefix(namePrefix('', key)).exec()).kvs;
    await provider.client.leaseClient.leaseRevoke({ ID: kv?.lease as string });
    const revokedAt = performance.now();
    await eventually('signal aborted', async () => lock.signal.aborted, 5_000);
    expect(performance.now() - revokedAt).toBeLessThan(1_500); // one watch event, not the next keepalive
    expect((lock.signal.reason as LockLostError).reason).toBe('revoked');
    const again = await provider.acquire(key, { waitMs: 2_000 });
    expect(again.fencingToken).toBeGreaterThan(lock.fencingToken);
    await again.release();
  });

  it('100 waiters: each release wakes at most one of them', async () => {
    // 101 providers in one process on a shared 2-core machine: a session lost to a CPU stall would
    // delete a waiter's key and wake the one behind it (6 s sessions were lost so on a machine
    // loaded eight times over); 20 s rides through such stalls, and nothing here waits for one.
    const waiters = Array.from({ length: 100 }, () => open({ sessionTtlMs: 20_000 }));
    await expectOneWakeupPerRelease(open({ sessionTtlMs: 20_000 }), waiters, uniqueKey('herd-100'));
  }, 120_000);

  it('a SIGKILLed holder process: the next waiter is granted within the session TTL + 1 s', async () => {
    const key = uniqueKey('sigkill');
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { EtcdLockProvider } from '${root}/dist/etcd.js';
         const p = new EtcdLockProvider({ endpoints: ${JSON.stringify(etcd.endpoints.split(','))}, sessionTtlMs: 2000 });
         const lock = await p.acquire(${JSON.stringify(key)});
         console.log('held ' + lock.fencingToken);
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      const [line] = (await once(child.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
      expect(line.toString()).toMatch(/^held \d+/);
      const waiter = open();
      const waiting = waiter.acquire(key, { waitMs: 10_000 });
      await eventually('queued', async () => (await waiter.inspect(key))?.waiters === 1);
      const killedAt = performance.now();
      await stopChild(child, 'SIGKILL');
      const lock = await waiting;
      const elapsed = performance.now() - killedAt;
      expect(elapsed).toBeLessThan(2_000 + 1_000);
      await lock.release();
    } finally {
      await stopChild(child, 'SIGKILL');
    }
  });
});

describe('etcd adapter on a 3-member cluster with faults', () => {
  let cluster: ServerGroup;
  beforeAll(async () => {
    cluster = await startServers('etcd', { size: 3, faults: true });
  });
  afterAll(() => cluster?.stop());

  it('killing the leader during contention: no overlapping grants, tokens still rise', async () => {
    const endpoints = endpoint(cluster, 'ETCD_ENDPOINTS').split(',');
    const clients = Array.from(
      { length: 4 },
      () => new EtcdLockProvider({ endpoints, sessionTtlMs: 2_000, callTimeoutMs: 1_000 }),
    );
    const { monitor, failuresAt, killedAt } = await contendThroughLeaderKill(
      clients,
      uniqueKey('leader-kill'),
      async () => {
        await cluster.members[await findLeader(endpoints)]?.kill();
      },
    );
    expect(monitor.entries).toBeGreaterThan(20);
    // Sessions on the dead member may be lost; once the survivors have a leader, calls go through.
    const lateFailures = failuresAt.filter((t) => t > killedAt + 3_000);
    expect(lateFailures, `${failuresAt.length} failures in all`).toEqual([]);
  }, 60_000);
});

async function findLeader(endpoints: string[]): Promise<number> {
  for (const [index, url] of endpoints.entries()) {
    const probe = new EtcdLockProvider({ endpoints: [url] });
    try {
      const status = await probe.client.maintenance.status();
      if (status.leader === status.header.member_id) return index;
    } finally {
      await probe.close();
    }
  }
  throw new Error('no leader');
}
