import { afterEach, expect, it } from 'vitest';
import { Redlock } from '../../src/compat/redlock/index.js';
import { MemoryLockProvider } from '../../src/index.js';

const providers: MemoryLockProvider[] = [];
afterEach(async () => {
  await Promise.allSettled(providers.splice(0).map((p) => p.close()));
});

/**
 * A multi-resource lock takes its resources one after the other: the first can be lost (here an
 * operator's forceRelease) while the second is waited for. The facade must not hand that set out:
 * the routine of `using` never runs on a resource nobody holds with a signal that is not aborted.
 */
it('redlock facade: a resource lost while a later one is waited for is taken again, never handed out lost', async () => {
  const provider = new MemoryLockProvider();
  providers.push(provider);
  const redlock = new Redlock(provider, { retryCount: -1 });
  const other = await provider.acquire('b');
  const seen: { aborted: boolean; aHeld: boolean }[] = [];
  const using = redlock.using(['a', 'b'], 5_000, async (signal) => {
    seen.push({ aborted: signal.aborted, aHeld: (await provider.inspect('a'))?.holder != null });
  });
  await new Promise((r) => setTimeout(r, 100)); // holds 'a', waits for 'b'
  expect(await provider.forceRelease('a', { reason: 'test: lose the first resource' })).not.toBeNull();
  await other.release();
  await using;
  expect(seen).toEqual([{ aborted: false, aHeld: true }]);
});
