import { describe, expect, it } from 'vitest';
import type { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { namePrefix } from '../../adapters/etcd/keys.js';
import { readWriteFolder } from '../../adapters/etcd/read-write.js';
import type { LockLostError } from '../../src/index.js';
import { releaseStale } from '../../src/testing/helpers.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

// A read-write grant on etcd is lost as a plain lock is: when its key is deleted by anyone but its
// holder (an operator's `etcdctl del`), its signal aborts ('revoked'), not only when its session
// ends. It used to stay held (signal quiet) while a waiting writer was granted. And a waiter whose
// session is lost stops waiting at once and re-enqueues on a new session (BackendUnavailableError,
// ridden through by the grant loop), as the mutex's waiters do; it used to go on watching the key
// before it until that key went or its waitMs ran out. Bounds are generous: a 2× slower machine
// passes, the old code never does (nothing happens there until waitMs or a release).

/** The keys of a read-write lock's queue, oldest first: key, lease (decimal) and create revision. */
async function queueOf(provider: EtcdLockProvider, name: string) {
  const prefix = namePrefix(readWriteFolder(provider.namespace), name);
  const { kvs } = await provider.client.getAll().prefix(prefix).sort('Create', 'Ascend').exec();
  return kvs.map((kv) => ({ key: kv.key.toString(), lease: kv.lease, revision: BigInt(kv.create_revision) }));
}

/** Settled-or-not of a promise, without awaiting it. */
function track<T>(promise: Promise<T>): { settled: () => boolean; promise: Promise<T> } {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  return { settled: () => settled, promise };
}

describe('etcd read-write lock: a grant whose key is deleted, a waiter whose session is lost', () => {
  const etcd = etcdFixture({ sessionTtlMs: 20_000, callTimeoutMs: 2_000 });

  for (const mode of ['read', 'write'] as const) {
    it(`a ${mode} whose key is deleted by another client: its signal aborts ('revoked'), then a waiting writer is granted with a greater token`, async () => {
      const holder = etcd.open();
      const writer = etcd.open();
      const operator = etcd.open();
      const name = uniqueKey(`rw-del-${mode}`);
      const rw = holder.readWriteLock(name);
      const held = mode === 'read' ? await rw.acquireRead() : await rw.acquireWrite();
      const waiting = track(writer.readWriteLock(name).acquireWrite({ waitMs: 30_000 }));
      await eventually('the writer queued', async () => (await queueOf(operator, name)).length === 2, 10_000);
      const [grantKey] = await queueOf(operator, name);
      expect(grantKey?.revision).toBe(held.fencingToken);
      await operator.client.delete().key(grantKey?.key as string);
      await eventually('the holder’s signal aborted', async () => held.signal.aborted, 10_000);
      expect((held.signal.reason as LockLostError).reason).toBe('revoked');
      expect(held.held).toBe(false);
      const granted = await waiting.promise;
      expect(granted.fencingToken).toBeGreaterThan(held.fencingToken);
      expect(granted.held).toBe(true);
      await releaseStale(held); // its key is gone already: it may say so, nothing else
      await granted.release();
    });
  }

  it('a waiting writer whose session is revoked re-enqueues on a new session at once, not after its waitMs; then it is granted', async () => {
    const holder = etcd.open();
    // A short session: its keepalive (every ttl/3) hears of the revoke within about a second.
    const waiter = etcd.open({ sessionTtlMs: 3_000 });
    const operator = etcd.open();
    const name = uniqueKey('rw-waiter-lost');
    const write = await holder.readWriteLock(name).acquireWrite();
    const waiting = track(waiter.readWriteLock(name).acquireWrite({ waitMs: 60_000 }));
    await eventually('the waiter queued', async () => (await queueOf(operator, name)).length === 2, 10_000);
    const [, queuedKey] = await queueOf(operator, name);
    const revoked = queuedKey?.lease as string;
    await operator.client.leaseClient.leaseRevoke({ ID: revoked });
    // Back in the queue on another session well within its waitMs (the old code stayed out of the
    // queue, watching the holder's key, until waitMs or a release).
    await eventually(
      'the waiter re-enqueued on a new session',
      async () => {
        const queue = await queueOf(operator, name);
        return queue.length === 2 && queue[1]?.lease !== revoked;
      },
      15_000,
    );
    expect(waiting.settled()).toBe(false);
    await write.release();
    const granted = await waiting.promise;
    expect(granted.held).toBe(true);
    expect(granted.fencingToken).toBeGreaterThan(write.fencingToken);
    await granted.release();
  });

  it('a waiting reader whose session is revoked while a lock-delay is waited out re-enqueues at once; then it is granted', async () => {
    const holder = etcd.open();
    const waiter = etcd.open({ sessionTtlMs: 3_000 });
    const operator = etcd.open();
    const name = uniqueKey('rw-delay-waiter-lost');
    // A write with a long lock-delay, lost (its key deleted): its marker keeps every grant out.
    const write = await holder.readWriteLock(name).acquireWrite({ lockDelayMs: 40_000 });
    const [writeKey] = await queueOf(operator, name);
    await operator.client.delete().key(writeKey?.key as string);
    const waiting = track(waiter.readWriteLock(name).acquireRead({ waitMs: 60_000 }));
    await eventually('the reader queued', async () => (await queueOf(operator, name)).length === 1, 10_000);
    const [queuedKey] = await queueOf(operator, name);
    const revoked = queuedKey?.lease as string;
    await operator.client.leaseClient.leaseRevoke({ ID: revoked });
    await eventually(
      'the reader re-enqueued on a new session',
      async () => {
        const queue = await queueOf(operator, name);
        return queue.length === 1 && queue[0]?.lease !== revoked;
      },
      15_000,
    );
    expect(waiting.settled()).toBe(false);
    // End the delay by hand (delete its markers): the reader is granted then.
    await operator.client
      .delete()
      .prefix(namePrefix(`${operator.namespace}/rwlock-delay/`, name))
      .exec();
    const granted = await waiting.promise;
    expect(granted.held).toBe(true);
    await granted.release();
    await releaseStale(write);
  }, 60_000);
});
