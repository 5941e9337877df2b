import { describe, expect, it } from 'vitest';
import { sleep } from '../../src/testing/helpers.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

// An etcd semaphore fills its limit: a waiting request whose permits fit takes them itself, without
// waiting for the requests ahead of it to be granted first (each of those needs its own client to
// hear the release, read and grant: the chain that kept the semaphore from ever filling). It still
// never passes a request ahead of it that does not fit. No bound here is a speed check: the old
// code never grants the second waiter while the first one's client hears nothing (its session
// outlives the test), so there it runs into waitMs.

describe('etcd semaphore: a waiter whose permits fit does not wait for the grants ahead of it', () => {
  const etcd = etcdFixture({ sessionTtlMs: 2_000, callTimeoutMs: 1_000 });

  it('the head’s client is cut off: the waiter behind it takes the permit that fits', async () => {
    await etcd.throughProxy(async (proxy) => {
      const holder = etcd.open();
      // Its session outlives the test: its queue key stays while it hears nothing.
      const slow = etcd.open({ endpoints: [`http://${proxy.address}`], sessionTtlMs: 60_000 });
      const behind = etcd.open();
      const name = uniqueKey('sem-fill');
      const limit = 2;
      const held = await holder.semaphore(name, { limit }).acquire({ permits: 2 });
      const view = holder.semaphore(name, { limit });
      let slowGranted = false;
      const slowWaits = slow
        .semaphore(name, { limit })
        .acquire({ waitMs: 60_000 })
        .then((permit) => {
          slowGranted = true;
          return permit;
        });
      slowWaits.catch(() => undefined); // awaited below; a failed test closes it unheard
      await eventually('the slow waiter queued', async () => (await view.inspect()).waiters === 1, 10_000);
      const behindWaits = behind.semaphore(name, { limit }).acquire({ waitMs: 20_000 });
      behindWaits.catch(() => undefined);
      await eventually('the second waiter queued', async () => (await view.inspect()).waiters === 2, 10_000);
      await sleep(200); // set-up: let both settle into their wait (not a bound)
      proxy.setMode({ kind: 'partition' });
      await held.release();
      const permit = await behindWaits;
      expect(permit.held).toBe(true);
      expect(slowGranted).toBe(false);
      const info = await view.inspect();
      expect(info.holders.map((h) => h.fencingToken)).toEqual([permit.fencingToken]);
      expect(info.waiters).toBe(1); // the slow one is still queued, ahead of the grant
      proxy.setMode({ kind: 'pass' });
      const late = await slowWaits;
      expect(late.held).toBe(true);
      expect((await view.inspect()).holders.length).toBe(2);
      await Promise.all([permit.release(), late.release()]);
    });
  });

  it('a request behind one that does not fit waits, though its own permits are free (FIFO)', async () => {
    const [holder, big, small, other] = [etcd.open(), etcd.open(), etcd.open(), etcd.open()];
    const name = uniqueKey('sem-fifo');
    const limit = 3;
    const held = await holder.semaphore(name, { limit }).acquire({ permits: 2 });
    const view = holder.semaphore(name, { limit });
    const bigWaits = big.semaphore(name, { limit }).acquire({ permits: 2, waitMs: 20_000 });
    await eventually('the big request queued', async () => (await view.inspect()).waiters === 1, 10_000);
    const smallWaits = small.semaphore(name, { limit }).acquire({ waitMs: 20_000 });
    for (const waits of [bigWaits, smallWaits]) waits.catch(() => undefined);
    await eventually('the small request queued', async () => (await view.inspect()).waiters === 2, 10_000);
    // One permit is free, but two are queued ahead: a try of one is refused, decided on its own read.
    expect(await other.semaphore(name, { limit }).tryAcquire()).toBeNull();
    expect((await view.inspect()).holders.length).toBe(1);
    await held.release();
    const [b, s] = await Promise.all([bigWaits, smallWaits]);
    expect(b.held && s.held).toBe(true);
    const info = await view.inspect();
    expect(info.holders.reduce((sum, h) => sum + h.permits, 0)).toBe(3);
    await Promise.all([b.release(), s.release()]);
  });

  it('a name with non-ASCII characters: a waiter in the front hears the release (its view watches the name’s own keys)', async () => {
    const [holder, waiter] = [etcd.open(), etcd.open()];
    const name = uniqueKey('sem-café-锁');
    const held = await holder.semaphore(name, { limit: 1 }).acquire();
    const view = holder.semaphore(name, { limit: 1 });
    // waitMs far past any release below: the old code's watch covered other keys, and it ran into it.
    const waits = waiter.semaphore(name, { limit: 1 }).acquire({ waitMs: 15_000 });
    waits.catch(() => undefined); // awaited below
    await eventually('the waiter queued', async () => (await view.inspect()).waiters === 1, 10_000);
    await sleep(200); // set-up: let it settle into its wait (not a bound)
    await held.release();
    const permit = await waits;
    expect(permit.held).toBe(true);
    expect((await view.inspect()).holders.map((h) => h.fencingToken)).toEqual([permit.fencingToken]);
    await permit.release();
  }, 30_000);

  it('a front waiter whose view cannot be read for a while keeps its place: granted before the waiter behind it', async () => {
    await etcd.throughProxy(async (proxy) => {
      const holder = etcd.open();
      // Its session outlives the outage below by far: its queue key, and so its place, stays.
      const first = etcd.open({ endpoints: [`http://${proxy.address}`], sessionTtlMs: 10_000 });
      const second = etcd.open();
      const name = uniqueKey('sem-outage');
      const held = await holder.semaphore(name, { limit: 1 }).acquire();
      const view = holder.semaphore(name, { limit: 1 });
      const order: string[] = [];
      const firstWaits = first
        .semaphore(name, { limit: 1 })
        .acquire({ waitMs: 30_000 })
        .then((permit) => {
          order.push('first');
          return permit;
        });
      firstWaits.catch(() => undefined); // awaited below
      await eventually('the first waiter queued', async () => (await view.inspect()).waiters === 1, 10_000);
      const secondWaits = second
        .semaphore(name, { limit: 1 })
        .acquire({ waitMs: 30_000 })
        .then((permit) => {
          order.push('second');
          return permit;
        });
      secondWaits.catch(() => undefined);
      await eventually('the second waiter queued', async () => (await view.inspect()).waiters === 2, 10_000);
      await sleep(200); // set-up: let both settle into their wait (not a bound)
      // The first waiter's connections are reset and refused: its view's watch breaks, and the reads
      // that would build it again fail until the proxy heals.
      proxy.setMode({ kind: 'refuse' });
      await sleep(1_500);
      proxy.setMode({ kind: 'pass' });
      await held.release();
      await eventually('a waiter was granted', async () => order.length > 0, 20_000);
      expect(order).toEqual(['first']);
      const permit = await firstWaits;
      expect((await view.inspect()).holders.map((h) => h.fencingToken)).toEqual([permit.fencingToken]);
      await permit.release();
      const next = await secondWaits;
      expect(next.fencingToken).toBeGreaterThan(permit.fencingToken);
      await next.release();
    });
  }, 60_000);

  it('a waiter whose connection is reset while it waits is granted after the release, never beside the holder', async () => {
    await etcd.throughProxy(async (proxy) => {
      const holder = etcd.open();
      const cut = etcd.open({ endpoints: [`http://${proxy.address}`], sessionTtlMs: 60_000 });
      const name = uniqueKey('sem-reset');
      const held = await holder.semaphore(name, { limit: 1 }).acquire();
      const view = holder.semaphore(name, { limit: 1 });
      const waits = cut.semaphore(name, { limit: 1 }).acquire({ waitMs: 30_000 });
      waits.catch(() => undefined);
      await eventually('the waiter queued', async () => (await view.inspect()).waiters === 1, 10_000);
      await sleep(200); // set-up: let it settle into its wait (not a bound)
      // Its watch stream breaks: the view it waits on is read again rather than resumed.
      proxy.cutAll();
      expect((await view.inspect()).holders.length).toBe(1);
      await held.release();
      const permit = await waits;
      expect(permit.held).toBe(true);
      const info = await view.inspect();
      expect(info.holders.map((h) => h.fencingToken)).toEqual([permit.fencingToken]);
      await permit.release();
    });
  });
});
