import { describe, expect, it } from 'vitest';
import { namePrefix } from '../../adapters/etcd/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const TTL_MS = 6_000;
/** How late the lease grant's answer comes: more than ttl/3, so ttl − 2 × it is less than ttl/3. */
const SLOW_GRANT_MS = 2_300;

describe('etcd session keepalives', () => {
  const etcd = etcdFixture();

  it('a session whose lease grant answered slowly is kept: its first keepalive comes while its trust lasts', async () => {
    await etcd.throughProxy(async (proxy) => {
      const provider = etcd.open({
        endpoints: [`http://${proxy.address}`],
        sessionTtlMs: TTL_MS,
        callTimeoutMs: 3 * SLOW_GRANT_MS,
      });
      await provider.inspect(uniqueKey('warm-up')); // connected; the session is opened by the acquire
      // The lease grant is answered SLOW_GRANT_MS late; from the lock's own request (the first that
      // carries its name) on, everything passes. Trust then lasts until about ttl − 2 × SLOW_GRANT_MS
      // after the answer (1.3 s): a first keepalive at ttl/3 (2 s) would come too late.
      const key = uniqueKey('slow-grant');
      const stored = namePrefix('', key); // how the name appears in etcd's keys
      proxy.cutAfterRequest((chunk) => {
        if (chunk.includes(stored)) proxy.setMode({ kind: 'pass' });
        return false;
      });
      proxy.setMode({ kind: 'delay', direction: 'toClient', ms: SLOW_GRANT_MS });
      const started = performance.now();
      const lock = await provider.acquire(key, { waitMs: 4 * SLOW_GRANT_MS });
      const grantedAfter = performance.now() - started;
      // Past where the trust of the slow answer alone ends, and past a keepalive at ttl/3.
      await sleep(TTL_MS / 2);
      const reason = (lock.signal.reason as { reason?: string } | undefined)?.reason;
      console.log(
        `etcd session: granted ${Math.round(grantedAfter)} ms after the acquire (lease grant answered ` +
          `${SLOW_GRANT_MS} ms late); ${TTL_MS / 2} ms later the lock is ${lock.signal.aborted ? `lost (${reason})` : 'held'}`,
      );
      expect(grantedAfter).toBeGreaterThanOrEqual(SLOW_GRANT_MS); // the grant was slowed
      expect(lock.signal.aborted).toBe(false);
      expect((await provider.inspect(lock.key))?.holder?.fencingToken).toBe(lock.fencingToken);
      await lock.release();
    });
  }, 30_000);
});
