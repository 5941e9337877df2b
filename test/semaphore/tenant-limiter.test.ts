import { describe, expect, it } from 'vitest';
import { createTenantLimiter, MemoryLockProvider } from '../../src/index.js';
import { MemoryLockServer } from '../../src/testing/index.js';

describe('createTenantLimiter', () => {
  it('limits each tenant on its own: a saturated tenant does not hold up another', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    const limiter = createTenantLimiter(provider, { limit: 2, prefix: 'tenants/' });
    let runningA = 0;
    let peakA = 0;
    let releaseA: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      releaseA = resolve;
    });
    const floodA = Array.from({ length: 10 }, () =>
      limiter.run('A', async () => {
        runningA += 1;
        peakA = Math.max(peakA, runningA);
        await gate;
        runningA -= 1;
      }),
    );
    await new Promise((r) => setTimeout(r, 20));
    const info = await provider.semaphore('tenants/A', { limit: 2 }).inspect();
    // Tenant B is served at once while A has 2 running and 8 queued.
    const b = await limiter.run('B', async (permit) => permit.fencingToken, { waitMs: 1_000 });
    releaseA();
    await Promise.all(floodA);
    await provider.close();
    expect({ holdersA: info.holders.length, waitersA: info.waiters, peakA, bGranted: typeof b }).toEqual({
      holdersA: 2,
      waitersA: 8,
      peakA: 2,
      bGranted: 'bigint',
    });
  });

  it('refuses a bad limit, tenant or provider', async () => {
    const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    expect(() => createTenantLimiter(provider, { limit: 0 })).toThrow(/limit/);
    expect(() => createTenantLimiter({} as never, { limit: 1 })).toThrow(/semaphore/);
    const limiter = createTenantLimiter(provider, { limit: 1 });
    await expect(limiter.run('', async () => 1)).rejects.toMatchObject({ argument: 'tenant' });
    await expect(limiter.run('a/../b', async () => 1)).rejects.toMatchObject({ argument: 'tenant' });
    await provider.close();
  });
});
