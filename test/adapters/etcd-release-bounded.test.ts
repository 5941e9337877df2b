import { describe, expect, it } from 'vitest';
import { uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

// A read-write grant's (or a permit's) release() that cannot reach etcd answers within about callTimeoutMs, as a
// lock's does, and the session still deletes the key once etcd answers again. It used to wait for
// the session's retried delete until the session's TTL ran out: seen in the torture as a
// read-write worker that "did not stop within 15 s" (a release, or withRead/withWrite, stuck in
// the delete's retries). The session's TTL here is far longer than the bound, so a 2× slower
// machine cannot turn the old wait into a pass or the new one into a failure.
const CALL_TIMEOUT_MS = 1_000;
const SESSION_TTL_MS = 20_000;
/** callTimeoutMs and a wide margin for a loaded machine; the old wait was SESSION_TTL_MS. */
const BOUND_MS = 6_000;

/** Settles within ms, or reports that it did not. */
async function settleWithin<T>(work: Promise<T>, ms: number): Promise<{ settled: boolean; error?: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    work.then(
      () => ({ settled: true, error: undefined }),
      (error: unknown) => ({ settled: true, error }),
    ),
    new Promise<{ settled: false }>((resolve) => {
      timer = setTimeout(() => resolve({ settled: false }), ms);
    }),
  ]);
  clearTimeout(timer);
  return outcome;
}

describe('etcd: a read-write or permit release that cannot reach etcd is bounded by callTimeoutMs', () => {
  const etcd = etcdFixture({ sessionTtlMs: SESSION_TTL_MS, callTimeoutMs: CALL_TIMEOUT_MS });

  it('read-write lock: release() answers BACKEND_UNAVAILABLE in time; the session deletes the key after the heal', async () => {
    await etcd.throughProxy(async (proxy) => {
      const a = etcd.open({ endpoints: [`http://${proxy.address}`] });
      const b = etcd.open();
      const name = uniqueKey('rw-release-cut');
      const read = await a.readWriteLock(name).acquireRead();
      proxy.setMode({ kind: 'blackhole' });
      const released = await settleWithin(read.release(), BOUND_MS);
      proxy.setMode({ kind: 'pass' });
      expect(released.settled, `release() still pending after ${BOUND_MS} ms`).toBe(true);
      expect(released.error).toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
      expect(read.held).toBe(false);
      // No completed effect lost: the session deletes the read's key once etcd answers, and a writer
      // gets in while A stays open (its session's TTL is far off).
      const write = await b.readWriteLock(name).acquireWrite({ waitMs: 10_000 });
      expect(a.closed).toBe(false);
      await write.release();
    });
  });

  it('read-write lock: withWrite answers in time once its function returned, though the release is cut off', async () => {
    await etcd.throughProxy(async (proxy) => {
      const a = etcd.open({ endpoints: [`http://${proxy.address}`] });
      const b = etcd.open();
      const name = uniqueKey('rw-with-cut');
      let returned: () => void = () => undefined;
      const fnReturned = new Promise<void>((resolve) => {
        returned = resolve;
      });
      const running = a.readWriteLock(name).withWrite(async () => {
        proxy.setMode({ kind: 'blackhole' });
        returned();
        return 'done';
      });
      await fnReturned;
      const outcome = await settleWithin(running, BOUND_MS);
      proxy.setMode({ kind: 'pass' });
      expect(outcome.settled, `withWrite still pending ${BOUND_MS} ms after its function returned`).toBe(
        true,
      );
      expect(outcome.error).toBeUndefined(); // the function's outcome, not the release's
      const read = await b.readWriteLock(name).acquireRead({ waitMs: 10_000 });
      await read.release();
    });
  });

  it('semaphore: a permit’s release() answers BACKEND_UNAVAILABLE in time; the session deletes the key after the heal', async () => {
    await etcd.throughProxy(async (proxy) => {
      const a = etcd.open({ endpoints: [`http://${proxy.address}`] });
      const b = etcd.open();
      const name = uniqueKey('permit-release-cut');
      const permit = await a.semaphore(name, { limit: 1 }).acquire();
      proxy.setMode({ kind: 'blackhole' });
      const released = await settleWithin(permit.release(), BOUND_MS);
      proxy.setMode({ kind: 'pass' });
      expect(released.settled, `release() still pending after ${BOUND_MS} ms`).toBe(true);
      expect(released.error).toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
      const next = await b.semaphore(name, { limit: 1 }).acquire({ waitMs: 10_000 });
      expect(a.closed).toBe(false);
      await next.release();
    });
  });
});
