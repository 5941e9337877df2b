import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

/**
 * Every call a provider's etcd3 client makes, counted in the process (the calls still go to the real
 * server): unary calls by service and method (all of them pass through the client's connection
 * pool), watches created, and keepalive streams (on the session's own timer, so reported apart).
 */
function countCalls(provider: EtcdLockProvider) {
  const client = provider.client as unknown as {
    pool: { exec: (service: string, method: string, ...rest: unknown[]) => Promise<unknown> };
    watch: () => unknown;
    leaseClient: { leaseKeepAlive: (...args: unknown[]) => unknown };
  };
  let calls: Record<string, number> = {};
  let watches = 0;
  let keepalives = 0;
  const exec = client.pool.exec.bind(client.pool);
  client.pool.exec = (service, method, ...rest) => {
    calls[`${service}.${method}`] = (calls[`${service}.${method}`] ?? 0) + 1;
    return exec(service, method, ...rest);
  };
  const watch = client.watch.bind(client);
  client.watch = () => {
    watches += 1;
    return watch();
  };
  const keepAlive = client.leaseClient.leaseKeepAlive.bind(client.leaseClient);
  client.leaseClient.leaseKeepAlive = (...args) => {
    keepalives += 1;
    return keepAlive(...args);
  };
  return {
    /** Counts since the last take(). */
    take() {
      const out = { calls, watches, keepalives };
      calls = {};
      watches = 0;
      keepalives = 0;
      return out;
    },
  };
}

// What one grant costs: Go's concurrency.Mutex makes two writes per uncontended lock + unlock, a
// create-if-absent Txn and a delete. fencekit makes the same two: the enqueue Txn (which reads the
// queue's head and the name's lock-delay marker in the same revision) and the guarded delete. The
// session's lease and the provider's deletion watch are made once, before the first grant.
describe('etcd calls per grant', () => {
  const etcd = etcdFixture();
  let provider: EtcdLockProvider;
  let counter: ReturnType<typeof countCalls>;
  beforeAll(() => {
    provider = etcd.open();
    counter = countCalls(provider);
  });
  afterAll(async () => {
    await provider?.close();
  });

  it('an uncontended acquire + release takes 2 Txns, as Go’s concurrency.Mutex', async () => {
    const key = uniqueKey('calls');
    await (await provider.acquire(key)).release(); // the session and the deletion watch exist now
    counter.take();
    const grants = 20;
    for (let i = 0; i < grants; i++) await (await provider.acquire(key)).release();
    const { calls, watches } = counter.take();
    console.log(`${grants} grants: ${JSON.stringify(calls)}, ${watches} watches`);
    expect(calls).toEqual({ 'KV.txn': 2 * grants });
    expect(watches).toBe(0);
  });

  it('a tryAcquire + release of a free name takes the same 2 Txns', async () => {
    const key = uniqueKey('calls-try');
    await (await provider.acquire(key)).release();
    counter.take();
    const grants = 10;
    for (let i = 0; i < grants; i++) await (await provider.tryAcquire(key))?.release();
    expect(counter.take().calls).toEqual({ 'KV.txn': 2 * grants });
  });

  it('a lock with a lock-delay adds one Txn, its marker’s put (its release deletes both)', async () => {
    const key = uniqueKey('calls-delay');
    await (await provider.acquire(key, { lockDelayMs: 1_000 })).release();
    counter.take();
    const grants = 10;
    for (let i = 0; i < grants; i++) await (await provider.acquire(key, { lockDelayMs: 1_000 })).release();
    expect(counter.take().calls).toEqual({ 'KV.txn': 3 * grants });
  });
});
