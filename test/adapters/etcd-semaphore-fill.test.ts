import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import type { Permit } from '../../src/semaphore/types.js';
import { uniqueKey } from '../../src/testing/index.js';
import { HoldingProxy } from '../servers/holding-proxy.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

/** Generous: every step waits for an event; this bound only turns a hang into a failure. */
const DEADLINE_MS = 20_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + DEADLINE_MS;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not within ${DEADLINE_MS} ms: ${what}`);
    await sleep(20);
  }
}

/**
 * One head turn fills every free permit: the head grants the waiters right behind it whose permits
 * fit, in queue order, before it hands the queue on. Shown with waiters that cannot act at all
 * (their connections held): their permits are granted all the same. With one grant per head turn,
 * the second waiter would have to take its permit itself, and never would while cut off.
 */
describe('etcd semaphore: a head turn fills every free permit', () => {
  let etcd: ServerGroup;
  beforeAll(async () => {
    etcd = await startServers('etcd');
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  it('the head grants the cut-off waiters behind it, each its own token', async () => {
    const endpoints = endpoint(etcd, 'ETCD_ENDPOINTS').split(',');
    const { hostname, port } = new URL(endpoints[0] as string);
    const proxies = await Promise.all(
      [0, 1].map(() => HoldingProxy.start({ host: hostname, port: Number(port) })),
    );
    const options = { sessionTtlMs: 60_000 };
    const holder = new EtcdLockProvider({ endpoints, ...options });
    const head = new EtcdLockProvider({ endpoints, ...options });
    const cutOff = proxies.map(
      (proxy) => new EtcdLockProvider({ endpoints: [`http://127.0.0.1:${proxy.port}`], ...options }),
    );
    const name = uniqueKey('sem-fill');
    const semaphore = (p: EtcdLockProvider) => p.semaphore(name, { limit: 3 });
    const observer = semaphore(holder);
    const waiters = async (n: number) => (await observer.inspect()).waiters >= n;
    try {
      const full = await observer.acquire({ permits: 3 });
      // Queued in this order: the head, then the two that will be cut off.
      const requests: Promise<Permit>[] = [];
      for (const [i, p] of [head, ...cutOff].entries()) {
        const request = semaphore(p).acquire({ waitMs: 3 * DEADLINE_MS });
        request.catch(() => undefined); // awaited below; a failed run closes the providers under it
        requests.push(request);
        await until(`waiter ${i + 1} queued`, () => waiters(i + 1));
      }
      for (const proxy of proxies) proxy.hold();
      await full.release();

      await until('all 3 permits granted', async () => (await observer.inspect()).holders.length === 3);
      const granted = (await observer.inspect()).holders;
      expect(granted.reduce((sum, h) => sum + h.permits, 0)).toBe(3);
      expect((await observer.inspect()).waiters).toBe(0);

      for (const proxy of proxies) proxy.heal();
      const permits = await Promise.all(requests);
      // Each grant its own revision (its token); each waiter holds the permit granted to it.
      const tokens = permits.map((p) => p.fencingToken);
      expect(new Set(tokens).size).toBe(3);
      expect(granted.map((h) => h.fencingToken).sort((a, b) => (a < b ? -1 : 1))).toEqual(
        [...tokens].sort((a, b) => (a < b ? -1 : 1)),
      );
      for (const permit of permits) expect(permit.held && !permit.signal.aborted).toBe(true);
      await Promise.all(permits.map((p) => p.release()));
      expect((await observer.inspect()).holders).toEqual([]);
    } finally {
      for (const proxy of proxies) proxy.heal();
      await Promise.allSettled([holder, head, ...cutOff].map((p) => p.close()));
      await Promise.allSettled(proxies.map((p) => p.close()));
    }
  }, 90_000);
});
