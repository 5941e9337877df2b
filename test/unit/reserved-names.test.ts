import { describe, expect, it } from 'vitest';
import { connect, createElection, InvalidArgumentError, type LockProvider } from '../../src/index.js';
import { validateKey } from '../../src/provider-kit.js';

/**
 * On ZooKeeper a semaphore `s` keeps its mutex in `s/locks` and its permits in `s/leases`, and
 * Curator's queue nodes are named `_c_<uuid>-…`: names that would put nodes there are refused on
 * every backend, so that a name valid on one backend is valid on all.
 */
describe('names reserved for the recipes’ own nodes', () => {
  const reserved = [
    's/leases',
    's/locks',
    'a/b/leases',
    's/leases/x',
    'a/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000001',
  ];

  it('validateKey refuses them and says why', () => {
    for (const key of reserved) expect(() => validateKey(key)).toThrow(InvalidArgumentError);
    expect(() => validateKey('s/leases')).toThrow(/"locks" and "leases" are reserved for semaphores/);
    expect(() => validateKey(reserved[4])).toThrow(/queue node's name/);
    // A first segment is no semaphore's folder, and look-alikes are names.
    for (const key of ['locks', 'leases/x', 'locks/a', 's/leases2', 's/my-locks', 'a/_c_x-lock-1'])
      expect(validateKey(key)).toBe(key);
    // Where no semaphore's node can be reached, the plain rules alone apply.
    for (const key of reserved) expect(validateKey(key, 'key', { allowReserved: true })).toBe(key);
    expect(() => validateKey('s//leases', 'key', { allowReserved: true })).toThrow(/empty path segment/);
  });

  // Validation comes before any backend call: servers that do not answer are enough here.
  const urls = [
    'memory://reserved-names',
    'etcd://127.0.0.1:1',
    'zk://127.0.0.1:1',
    'redis://127.0.0.1:1',
    'redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3',
    'postgres://fencekit@127.0.0.1:1/fencekit',
  ];

  it.each(urls)('every call that takes a name refuses them: %s', async (url) => {
    const provider: LockProvider = await connect(url, { callTimeoutMs: 500 });
    try {
      for (const name of reserved) {
        const calls: Array<() => Promise<unknown> | undefined> = [
          () => provider.acquire(name),
          () => provider.tryAcquire(name),
          () => createElection(provider, name).campaign('x'),
        ];
        if (provider.semaphore) calls.push(() => provider.semaphore?.(name, { limit: 1 }).tryAcquire());
        for (const call of calls) await expect((async () => call())()).rejects.toThrow(InvalidArgumentError);
      }
      // Reads and removals reach a semaphore's nodes only on ZooKeeper: elsewhere they take the name
      // (and then fail for want of a server, or find nothing).
      const admin: Array<(name: string) => Promise<unknown> | undefined> = [(name) => provider.inspect(name)];
      if (provider.forceRelease) admin.push((name) => provider.forceRelease?.(name, { reason: 'test' }));
      for (const name of ['s/leases', 's/locks', 'tenants/leases']) {
        for (const call of admin) {
          const outcome = await (async () => call(name))().catch((e: unknown) => e);
          if (provider.backend === 'zookeeper') expect(outcome).toBeInstanceOf(InvalidArgumentError);
          else expect(outcome).not.toBeInstanceOf(InvalidArgumentError);
        }
      }
    } finally {
      await provider.close();
    }
  });
});
