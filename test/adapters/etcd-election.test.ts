import { describe, expect, it } from 'vitest';
import type { LeaderInfo } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';
import { etcdctl, stopChild } from '../servers/processes.js';

/** Collects what observe() yields until the returned stop() is called. */
function record(iterable: AsyncIterable<LeaderInfo | null>, controller: AbortController) {
  const seen: Array<LeaderInfo | null> = [];
  const done = (async () => {
    for await (const leader of iterable) seen.push(leader);
  })();
  return {
    seen,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

describe('etcd native election', () => {
  const etcd = etcdFixture({ sessionTtlMs: 2_000 });
  const open = () => etcd.open();

  it('campaign, leader, proclaim, resign and observe (including "no leader")', async () => {
    const name = uniqueKey('election');
    const [providerA, providerB] = [open(), open()];
    const [a, b] = [providerA.election(name), providerB.election(name)];
    const controller = new AbortController();
    const watch = record(b.observe({ signal: controller.signal }), controller);
    await eventually('first observation', async () => watch.seen.length === 1);
    expect(watch.seen[0]).toBeNull();

    const observed = (value: string | null) =>
      eventually(`observe() reports ${value}`, async () => (watch.seen.at(-1)?.value ?? null) === value);
    const termA = await a.campaign('node-a');
    expect(await b.leader()).toEqual({ value: 'node-a', term: termA.term });
    await observed('node-a');
    const bCampaign = b.campaign('node-b', { waitMs: 10_000 });
    await eventually('b queued', async () => (await providerB.inspect(name))?.waiters === 1);
    await termA.proclaim('node-a:8080');
    expect((await a.leader())?.value).toBe('node-a:8080');
    await observed('node-a:8080');
    await termA.resign();
    expect(termA.signal.aborted).toBe(true);
    await expect(termA.proclaim('late')).rejects.toMatchObject({ code: 'NOT_HOLDER' });
    const termB = await bCampaign;
    expect(termB.term).toBeGreaterThan(termA.term);
    await observed('node-b');
    await termB.resign();
    await observed(null);
    await watch.stop();
    expect(watch.seen.map((l) => l?.value ?? null)).toEqual([null, 'node-a', 'node-a:8080', 'node-b', null]);
  });

  it('interoperates with `etcdctl elect` and `etcdctl elect -l`', async () => {
    const name = `elect-${crypto.randomUUID()}`;
    const election = open().election(name);
    const listener = etcdctl(etcd.endpoints, ['elect', '-l', name]);
    const term = await election.campaign('fencekit-node');
    await eventually('etcdctl elect -l sees our leader', async () =>
      listener.lines.includes('fencekit-node'),
    );
    await term.proclaim('fencekit-node-2');
    await eventually('etcdctl sees the proclamation', async () => listener.lines.includes('fencekit-node-2'));

    const rival = etcdctl(etcd.endpoints, ['elect', name, 'etcdctl-node']);
    await new Promise((r) => setTimeout(r, 300));
    expect(rival.lines.some((l) => l === 'etcdctl-node')).toBe(false); // waits behind us
    await term.resign();
    await eventually('etcdctl campaign wins', async () => rival.lines.includes('etcdctl-node'));
    const leader = await election.leader();
    expect(leader?.value).toBe('etcdctl-node');
    expect(leader?.term).toBeGreaterThan(term.term);
    await Promise.all([stopChild(rival.child), stopChild(listener.child)]);
  });

  it('five candidates: one leader at a time, terms rise strictly', async () => {
    const name = uniqueKey('five');
    const candidates = Array.from({ length: 5 }, (_, i) => ({
      id: `node-${i}`,
      election: open().election(name),
    }));
    const terms: bigint[] = [];
    let leaders = 0;
    await Promise.all(
      candidates.map(async ({ id, election }) => {
        const term = await election.campaign(id, { waitMs: 20_000 });
        leaders += 1;
        expect(leaders).toBe(1);
        expect((await election.leader())?.value).toBe(id);
        terms.push(term.term);
        await new Promise((r) => setTimeout(r, 20));
        leaders -= 1;
        await term.resign();
      }),
    );
    expect(terms).toEqual([...terms].sort((x, y) => (x < y ? -1 : 1)));
    expect(new Set(terms).size).toBe(5);
  });
});
