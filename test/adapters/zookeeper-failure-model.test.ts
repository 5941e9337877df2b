import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { curatorMissing, startCuratorHolder } from '../interop/curator.js';
import { type PartitionableEnsemble, startPartitionableEnsemble } from '../servers/zk-peer-links.js';
import { ObservedProvider } from './zookeeper-observed.js';

// What a holder sees, and when, under each fault of a 3-node ensemble (tickTime 200, session 4 s):
// the figures for the failure-model table (docs/failure-model.md). Each case asserts the one thing that must hold
// whatever the timing: nobody else is granted while the holder's signal is live.
// About 100 s of killed and paused servers: it runs with FENCEKIT_FAILURE_MODEL=1 and prints the table.
// Then fencekit and Curator (Debian's jars, test/interop/CuratorHolder.java) side by side under the
// same faults, about 4 min more: a second table, kept or lost and when.

const SESSION_MS = 4_000;
const WATCH_MS = 8_000;

interface Outcome {
  /** ms after the fault: the holder's signal aborted (undefined: still held after WATCH_MS). */
  abortedAt?: number;
  /** ms after the fault: the other client was granted (undefined: not within WATCH_MS). */
  grantedAt?: number;
}

describe.runIf(process.env.FENCEKIT_FAILURE_MODEL === '1')(
  'ZooKeeper failure model (3 nodes, tickTime 200, session 4 s)',
  () => {
    let ensemble: PartitionableEnsemble;
    const providers: ZooKeeperLockProvider[] = [];
    const rows: string[] = [];
    const open = (nodes: number[]) => {
      const provider = new ZooKeeperLockProvider({
        connectString: nodes.map((n) => ensemble.clientAddress(n)).join(','),
        sessionTimeoutMs: SESSION_MS,
        serverTickMs: 200,
        callTimeoutMs: 1_000,
      });
      providers.push(provider);
      return provider;
    };
    /** The roles once the ensemble has settled (one leader, two followers), after the previous case. */
    const roles = () => ensemble.settled();

    /**
     * The holder on `holderNodes` takes a lock; another client on `otherNode` waits for it; `fault`
     * runs; we watch for WATCH_MS, then `heal`, release and let the other client finish.
     */
    async function measure(
      fault: string,
      holderNodes: number[] | 'all',
      pick: (r: { leader: number; followers: number[]; holderServer: number }) => {
        other: number;
        inject: () => Promise<void> | void;
        heal: () => Promise<void> | void;
      },
    ): Promise<Outcome> {
      await roles();
      await new Promise((r) => setTimeout(r, 1_000)); // a member that just rejoined has synced its sessions
      const holderSide = open(holderNodes === 'all' ? [0, 1, 2] : holderNodes);
      const key = uniqueKey('failure-model');
      const lock = await holderSide.acquire(key);
      const counts = await Promise.all([0, 1, 2].map((n) => ensemble.connections(n)));
      const holderServer =
        holderNodes === 'all' ? counts.indexOf(Math.max(...counts)) : (holderNodes[0] as number);
      const { other, inject, heal } = pick({ ...(await roles()), holderServer });
      const otherSide = open([other]);
      // Its session is open, and it has been granted once, before the fault: it rides through outages.
      await (await otherSide.acquire(uniqueKey('warm-up'))).release();
      const faultAt = performance.now();
      const outcome: Outcome = {};
      const granted = otherSide.acquire(key, { waitMs: 30_000 }).then((l) => {
        outcome.grantedAt = performance.now() - faultAt;
        return l;
      });
      granted.catch(() => undefined);
      lock.signal.addEventListener('abort', () => {
        outcome.abortedAt ??= performance.now() - faultAt;
      });
      await inject();
      await new Promise((r) => setTimeout(r, WATCH_MS));
      const endOfWatch = { ...outcome };
      await heal();
      const releasedAt = performance.now() - faultAt;
      await lock.release().catch(() => undefined);
      const next = await granted;
      await next.release();
      const f = (ms?: number) =>
        ms === undefined ? `— (> ${WATCH_MS / 1000} s)` : `${(ms / 1000).toFixed(2)} s`;
      rows.push(
        `| ${fault} | ${f(endOfWatch.abortedAt)} | ${f(endOfWatch.grantedAt)} | holder on ${holderServer === (await roles()).leader ? 'leader' : 'follower'} |`,
      );
      // Safety: the other client is granted only after the holder's signal aborted or it released.
      expect(outcome.grantedAt as number).toBeGreaterThan(outcome.abortedAt ?? releasedAt);
      return endOfWatch;
    }

    beforeAll(async () => {
      ensemble = await startPartitionableEnsemble(200);
    }, 180_000);
    afterAll(async () => {
      await Promise.allSettled(providers.map((p) => p.close()));
      await ensemble?.stop();
      if (rows.length > 0)
        console.log(
          ['| fault | holder aborted | other granted | |', '|---|---|---|---|', ...rows].join('\n'),
        );
    });

    it('pause (SIGSTOP) of the holder’s only server', async () => {
      const { followers } = await roles();
      const f = followers[0] as number;
      await measure('pause holder’s server (holder knows 1 server)', [f], () => ({
        other: followers[1] as number,
        inject: () => ensemble.pause(f),
        heal: () => ensemble.resume(f),
      }));
    }, 60_000);

    it('pause (SIGSTOP) of the holder’s server, holder knows all three', async () => {
      await measure('pause holder’s server (holder knows 3)', 'all', ({ holderServer }) => ({
        other: (holderServer + 1) % 3,
        inject: () => ensemble.pause(holderServer),
        heal: () => ensemble.resume(holderServer),
      }));
    }, 60_000);

    it('kill (SIGKILL) of the holder’s only server, restarted after the watch', async () => {
      const { followers } = await roles();
      const f = followers[0] as number;
      await measure('kill holder’s server (holder knows 1)', [f], () => ({
        other: followers[1] as number,
        inject: () => ensemble.kill(f),
        heal: () => ensemble.restart(f),
      }));
    }, 90_000);

    it('kill (SIGKILL) of the holder’s server, holder knows all three', async () => {
      await measure('kill holder’s server (holder knows 3)', 'all', ({ holderServer }) => ({
        other: (holderServer + 1) % 3,
        inject: () => ensemble.kill(holderServer),
        heal: () => ensemble.restart(holderServer),
      }));
    }, 90_000);

    it('partition of the holder’s server from the quorum (held bytes, no reset)', async () => {
      const { followers } = await roles();
      const f = followers[0] as number;
      await measure('partition holder’s server from quorum (holder knows 1)', [f], () => ({
        other: followers[1] as number,
        inject: () => ensemble.isolate(f),
        heal: () => ensemble.heal(f),
      }));
    }, 60_000);

    it('partition of the holder’s server from the quorum, holder knows all three', async () => {
      const { followers } = await roles();
      await measure(
        'partition holder’s server from quorum (holder knows 3)',
        'all',
        ({ holderServer, leader }) => ({
          other: holderServer === leader ? (followers[0] as number) : leader,
          inject: () => ensemble.isolate(holderServer),
          heal: () => ensemble.heal(holderServer),
        }),
      );
    }, 60_000);

    it('member loss: the leader is killed (holder on a follower), restarted after the watch', async () => {
      const { leader, followers } = await roles();
      await measure('member loss: leader killed (holder on a follower)', [followers[0] as number], () => ({
        other: followers[1] as number,
        inject: () => ensemble.kill(leader),
        heal: () => ensemble.restart(leader),
      }));
    }, 90_000);

    it('restart: the holder’s only server killed and started again at once', async () => {
      const { followers } = await roles();
      const f = followers[0] as number;
      await measure('restart holder’s server (holder knows 1)', [f], () => ({
        other: followers[1] as number,
        inject: async () => {
          await ensemble.kill(f);
          await ensemble.restart(f);
        },
        heal: () => undefined,
      }));
    }, 90_000);

    it('restart: the whole ensemble killed and started again at once', async () => {
      const { followers } = await roles();
      const all = [0, 1, 2];
      await measure('restart the whole ensemble (holder knows 3)', 'all', () => ({
        other: followers[1] as number,
        inject: async () => {
          await Promise.all(all.map((n) => ensemble.kill(n)));
          await Promise.all(all.map((n) => ensemble.restart(n)));
        },
        heal: () => undefined,
      }));
    }, 120_000);

    // ---- fencekit and Curator side by side -------------------------------------------------------

    type Placement = 'follower' | 'leader' | 'only-follower';
    interface Fault {
      name: string;
      /** Where the holder's session is: on a follower or the leader (knowing all three), or knowing one follower only. */
      placement: Placement;
      /** Starts the fault; `heal` undoes what is still in effect after the watch. */
      start: (r: { leader: number; followers: number[]; holderServer: number }) => Promise<void> | void;
      heal: (r: { leader: number; followers: number[]; holderServer: number }) => Promise<void> | void;
    }
    const sideBySide: string[] = [];
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const pauseFor = (ms: number) => (node: (r: { leader: number; holderServer: number }) => number) => ({
      start: (r: { leader: number; followers: number[]; holderServer: number }) => {
        ensemble.pause(node(r));
        setTimeout(() => ensemble.resume(node(r)), ms).unref();
      },
      heal: (r: { leader: number; followers: number[]; holderServer: number }) => ensemble.resume(node(r)),
    });
    const holders = (r: { holderServer: number }) => r.holderServer;
    const faults: Fault[] = [
      { name: 'holder’s server paused 3.2 s', placement: 'follower', ...pauseFor(3_200)(holders) },
      { name: 'holder’s server paused 8 s', placement: 'follower', ...pauseFor(WATCH_MS)(holders) },
      { name: 'holder’s server (the leader) paused 3.2 s', placement: 'leader', ...pauseFor(3_200)(holders) },
      {
        name: 'leader paused 8 s, holder on a follower',
        placement: 'follower',
        ...pauseFor(WATCH_MS)((r) => r.leader),
      },
      { name: 'holder’s only server paused 3.2 s', placement: 'only-follower', ...pauseFor(3_200)(holders) },
      { name: 'holder’s only server paused 8 s', placement: 'only-follower', ...pauseFor(WATCH_MS)(holders) },
      {
        name: 'holder’s server killed, restarted after the watch',
        placement: 'follower',
        start: (r) => ensemble.kill(r.holderServer),
        heal: (r) => ensemble.restart(r.holderServer),
      },
      {
        name: 'holder’s server cut off from the quorum',
        placement: 'follower',
        start: (r) => ensemble.isolate(r.holderServer),
        heal: (r) => ensemble.heal(r.holderServer),
      },
    ];
    const connectionCounts = () => Promise.all([0, 1, 2].map((n) => ensemble.connections(n)));
    const newServer = (before: number[], after: number[]) =>
      after.findIndex((c, n) => c > (before[n] as number));
    const knows = async (placement: Placement) =>
      placement === 'only-follower' ? [(await roles()).followers[0] as number] : [0, 1, 2];
    const fits = (placement: Placement, server: number, leader: number) =>
      placement === 'leader' ? server === leader : server !== leader;
    /**
     * A fencekit client on another member (root '': Curator's paths), its session opened and used
     * before the fault (opening one needs the leader); wait() starts waiting for the lock.
     */
    const contender = async (holderServer: number, leader: number) => {
      const other = [0, 1, 2].find((n) => n !== holderServer && n !== leader) ?? (holderServer + 1) % 3;
      const provider = new ZooKeeperLockProvider({
        connectString: ensemble.clientAddress(other),
        root: '',
        sessionTimeoutMs: SESSION_MS,
        serverTickMs: 200,
        callTimeoutMs: 1_000,
      });
      providers.push(provider);
      await (await provider.acquire(`failure-model/warm-up-${crypto.randomUUID()}`)).release();
      return {
        wait(name: string, faultAt: number) {
          let grantedAt: number | undefined;
          const granted = provider.acquire(name, { waitMs: 60_000 }).then((lock) => {
            grantedAt = performance.now() - faultAt;
            return lock;
          });
          granted.catch(() => undefined);
          return { granted, grantedAt: () => grantedAt };
        },
      };
    };
    const f = (ms?: number) => (ms === undefined ? 'kept' : `${(ms / 1000).toFixed(2)} s`);

    async function fencekitUnder(fault: Fault): Promise<string> {
      const name = `failure-model/fencekit-${crypto.randomUUID()}`;
      for (let attempt = 0; attempt < 10; attempt++) {
        const { leader } = await roles();
        await sleep(1_000);
        const before = await connectionCounts();
        const holderSide = new ObservedProvider({
          connectString: (await knows(fault.placement)).map((n) => ensemble.clientAddress(n)).join(','),
          root: '',
          sessionTimeoutMs: SESSION_MS,
          serverTickMs: 200,
          callTimeoutMs: 1_000,
        });
        providers.push(holderSide);
        const lock = await holderSide.acquire(name);
        const holderServer = newServer(before, await connectionCounts());
        if (!fits(fault.placement, holderServer, leader)) {
          await holderSide.close();
          continue;
        }
        const r = { ...(await roles()), holderServer };
        const otherSide = await contender(holderServer, r.leader);
        await holderSide.nextHeartbeat(); // the worst phase: the whole span ahead must be covered
        const faultAt = performance.now();
        const other = otherSide.wait(name, faultAt);
        let abortedAt: number | undefined;
        lock.signal.addEventListener('abort', () => {
          abortedAt ??= performance.now() - faultAt;
        });
        await fault.start(r);
        await sleep(WATCH_MS);
        const seen = { abortedAt, grantedAt: other.grantedAt() };
        await fault.heal(r);
        const releasedAt = performance.now() - faultAt;
        await lock.release().catch(() => undefined);
        await (await other.granted).release();
        // Safety: the other client is granted only after the holder's signal aborted or it released.
        expect(
          other.grantedAt() as number,
          `${fault.name}: lost at ${abortedAt} (${String(lock.signal.reason)}), other granted at ${other.grantedAt()}`,
        ).toBeGreaterThan(abortedAt ?? releasedAt);
        const reason = lock.signal.aborted
          ? ` (${(lock.signal.reason as { reason?: string }).reason ?? ''})`
          : '';
        return `${seen.abortedAt === undefined ? 'kept' : `lost at ${f(seen.abortedAt)}${reason}`}; other granted ${seen.grantedAt === undefined ? '—' : `at ${f(seen.grantedAt)}`}`;
      }
      throw new Error(`the holder did not land on a ${fault.placement}`);
    }

    async function curatorUnder(fault: Fault): Promise<string> {
      for (let attempt = 0; attempt < 8; attempt++) {
        const name = `failure-model/curator-${crypto.randomUUID()}`;
        const { leader } = await roles();
        await sleep(1_000);
        const before = await connectionCounts();
        const connect = (await knows(fault.placement)).map((n) => ensemble.clientAddress(n)).join(',');
        const holder = await startCuratorHolder(connect, `/${name}`, SESSION_MS);
        await holder.granted;
        const holderServer = newServer(before, await connectionCounts());
        if (!fits(fault.placement, holderServer, leader)) {
          await holder.close();
          continue;
        }
        const r = { ...(await roles()), holderServer };
        const otherSide = await contender(holderServer, r.leader);
        const faultAt = performance.now();
        const other = otherSide.wait(name, faultAt);
        const seenFrom = holder.events.length;
        await fault.start(r);
        await sleep(WATCH_MS);
        const states = holder.events
          .slice(seenFrom)
          .filter((e) => e.line.startsWith('state '))
          .map((e) => `${e.line.slice(6)} ${f(e.at - faultAt)}`);
        const grantedAt = other.grantedAt();
        await fault.heal(r);
        holder.release();
        await (await other.granted).release();
        await holder.close();
        const lost = states.some((s) => s.startsWith('LOST')) || grantedAt !== undefined;
        return `${lost ? 'lost' : 'kept'} (${states.join(', ') || 'no state change'}); other granted ${grantedAt === undefined ? '—' : `at ${f(grantedAt)}`}`;
      }
      throw new Error(`the Curator holder did not land on a ${fault.placement}`);
    }

    for (const fault of faults) {
      it.skipIf(curatorMissing() !== undefined)(
        `side by side: ${fault.name}`,
        async () => {
          const fencekit = await fencekitUnder(fault);
          const curator = await curatorUnder(fault);
          sideBySide.push(`| ${fault.name} (${fault.placement}) | ${fencekit} | ${curator} |`);
          console.log(sideBySide.at(-1));
        },
        120_000,
      );
    }
    afterAll(() => {
      if (sideBySide.length > 0)
        console.log(['| fault | fencekit | Curator |', '|---|---|---|', ...sideBySide].join('\n'));
    });
  },
);
