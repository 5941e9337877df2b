import { afterEach, describe, expect, it } from 'vitest';
import type { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import type { LeaderInfo } from '../../src/election/types.js';
import { connect, InvalidArgumentError } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { CliProcesses } from '../cli/cli-process.js';
import { zookeeperFixture } from '../servers/zookeeper-fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

/** Edges of the ZooKeeper recipes, each on a real server. */
describe('ZooKeeper edges', () => {
  const zk = zookeeperFixture({ sessionTimeoutMs: 4_000, serverTickMs: 200 });
  const open = zk.open;

  describe("names reserved for a semaphore's folders", () => {
    /** Each use of a name that, before they were refused, put nodes in semaphore `s`'s folders. */
    const collisions: Array<{
      use: string;
      run: (p: ZooKeeperLockProvider, s: string) => Promise<{ release(): Promise<unknown> }>;
    }> = [
      { use: 'lock s/leases', run: (p, s) => p.acquire(`${s}/leases`) },
      { use: 'lock s/leases/x', run: (p, s) => p.acquire(`${s}/leases/x`) },
      { use: 'lock s/locks', run: (p, s) => p.acquire(`${s}/locks`) },
      {
        use: 'election s/leases',
        run: async (p, s) => {
          const term = await p.election(`${s}/leases`).campaign('x');
          return { release: () => term.resign() };
        },
      },
      { use: 'semaphore s/leases', run: (p, s) => p.semaphore(`${s}/leases`, { limit: 1 }).acquire() },
    ];

    it('are refused, and the semaphore s counts only its own permits', async () => {
      const [p, other] = [open(), open()];
      const seen: string[] = [];
      for (const { use, run } of collisions) {
        const s = uniqueKey('sem-reserved');
        const semaphore = p.semaphore(s, { limit: 2 });
        const first = await semaphore.acquire();
        const colliding = await (async () => run(other, s))().catch((error: unknown) => error);
        // Only one permit of two is held: a second one is free, whatever the other name holds.
        const second = await semaphore.tryAcquire();
        seen.push(
          `${use}: ${colliding instanceof Error ? colliding.constructor.name : 'granted'}, second permit ${second ? 'granted' : 'refused'}`,
        );
        await second?.release();
        if (!(colliding instanceof Error)) await (colliding as { release(): Promise<unknown> }).release();
        await first.release();
      }
      console.log(`names in a semaphore's folders:\n  ${seen.join('\n  ')}`);
      expect(seen).toEqual(
        collisions.map(({ use }) => `${use}: InvalidArgumentError, second permit granted`),
      );
    }, 60_000);

    it('are refused by every call that takes a name, naming the reserved segment', async () => {
      const p = open();
      for (const name of ['s/leases', 's/locks', 's/leases/x', 'a/b/locks']) {
        const calls = [
          () => p.acquire(name),
          () => p.tryAcquire(name),
          () => p.withLock(name, async () => undefined),
          () => p.inspect(name),
          () => p.forceRelease(name, { reason: 'test' }),
          () => p.election(name).campaign('x'),
          () => p.semaphore(name, { limit: 1 }).acquire(),
        ];
        for (const call of calls) {
          await expect((async () => call())()).rejects.toThrow(InvalidArgumentError);
          await expect((async () => call())()).rejects.toThrow(
            /"locks" and "leases" are reserved for semaphores/,
          );
        }
      }
      // A first segment is no semaphore's folder: still a name.
      await (await p.acquire(`locks/${uniqueKey('first-segment')}`)).release();
    }, 30_000);
  });

  describe('election: the leader read between two calls', () => {
    /**
     * The observer's listing of the candidates is answered with the leader's node in it, and that
     * node is deleted (the leader resigns) before the listing reaches the reader: the next read, of
     * the leader's data, finds no node although the second candidate leads already.
     */
    const withLeaderGoneAfterListing = async (
      read: (name: string, observer: ZooKeeperLockProvider) => Promise<LeaderInfo | null>,
    ) => {
      const name = uniqueKey('leader-gap');
      const [a, b, observer] = [open(), open(), open()];
      const first = await a.election(name).campaign('a');
      const second = b.election(name).campaign('b'); // leads once a resigns
      const folder = observer.folder(name);
      const candidates = async () =>
        (await (await a.election(name).host.session()).client.getChildren(folder)).length;
      await expect.poll(candidates, { timeout: 10_000 }).toBe(2);
      const session = await observer.election(name).host.session(); // the session its reads go through
      const listChildren = session.client.getChildren;
      let gaps = 0;
      session.client.getChildren = async (path, opts) => {
        const children = await listChildren.call(session.client, path, opts);
        if (path === folder && gaps === 0) {
          gaps += 1;
          expect(children).toHaveLength(2);
          await first.resign(); // gone before the reader sees the listing
        }
        return children;
      };
      try {
        const leader = await read(name, observer);
        expect(gaps).toBe(1);
        return leader;
      } finally {
        session.client.getChildren = listChildren;
        if (gaps === 0) await first.resign();
        await (await second).resign();
      }
    };

    it('observe() reports the next leader, never null while a candidate is left', async () => {
      const leader = await withLeaderGoneAfterListing(async (name, observer) => {
        const stop = new AbortController();
        for await (const seen of observer.election(name).observe({ signal: stop.signal })) {
          stop.abort();
          return seen;
        }
        return undefined as never;
      });
      console.log(
        `observe() with the leader gone between its two reads: ${JSON.stringify(leader?.value ?? null)}`,
      );
      expect(leader?.value).toBe('b');
    }, 30_000);

    it('leader() reports the next leader, never null while a candidate is left', async () => {
      const leader = await withLeaderGoneAfterListing((name, observer) => observer.election(name).leader());
      console.log(
        `leader() with the leader gone between its two reads: ${JSON.stringify(leader?.value ?? null)}`,
      );
      expect(leader?.value).toBe('b');
    }, 30_000);
  });

  describe('a missing chroot', () => {
    const cli = new CliProcesses();
    afterEach(() => cli.stop());
    const missing = () => `missing-chroot-${process.pid}-${Math.round(performance.now())}`;

    it('acquire fails with an error naming the chroot, with waitMs and without', async () => {
      const chroot = missing();
      const provider = await connect(`zk://${zk.connectString}/${chroot}`, { callTimeoutMs: 2_000 });
      try {
        for (const options of [{ waitMs: 3_000 }, undefined]) {
          const started = performance.now();
          const outcome = await Promise.race([
            provider.acquire('jobs/nightly', options).then(
              async (lock) => {
                await lock.release();
                return 'granted';
              },
              (error: unknown) => error,
            ),
            sleep(15_000).then(() => 'still pending after 15 s'),
          ]);
          const ms = Math.round(performance.now() - started);
          console.log(
            `missing chroot, waitMs ${options?.waitMs ?? 'not given'}: after ${ms} ms: ${String(outcome)}`,
          );
          expect(outcome).toBeInstanceOf(InvalidArgumentError);
          expect((outcome as Error).message).toContain(`/${chroot}`);
        }
      } finally {
        await provider.close();
      }
    }, 60_000);

    it('fencekit lock exits non-zero and names the chroot (dist: npm run build)', async () => {
      const chroot = missing();
      const run = cli.start([
        'lock',
        'jobs/nightly',
        '--url',
        `zk://${zk.connectString}/${chroot}`,
        '--',
        'true',
      ]);
      const code = await run.exited(15_000).catch((error: Error) => error.message);
      await run.closed().catch(() => undefined);
      console.log(`fencekit lock on a missing chroot: exit ${code}, stderr ${JSON.stringify(run.stderr())}`);
      expect(code).not.toBe(0);
      expect(typeof code).toBe('number');
      expect(run.stderr()).toContain(`/${chroot}`);
    }, 30_000);
  });
});
