import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { connect, type LockProvider } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

let redis: ServerGroup;
let url: string;
let proxy: FaultProxy;
const providers: LockProvider[] = [];
beforeAll(async () => {
  redis = await startServers('redis', { faults: true });
  url = endpoint(redis, 'REDIS_URL');
  const { hostname, port } = new URL(url);
  proxy = await FaultProxy.start({ host: hostname, port: Number(port) });
});
afterAll(async () => {
  proxy?.setMode({ kind: 'pass' });
  await Promise.allSettled(providers.map((p) => p.close()));
  await proxy?.close();
  await redis?.stop();
});

/**
 * A force-release whose answer comes too late may have removed the grant all the same (safety
 * review): the attempt is recorded before the error reaches the operator, and a retry guarded by
 * the token the operator saw never removes the next holder.
 */
it('a force-release with an unknown outcome is audited, and a retry with the seen token spares the next holder', async () => {
  const lines: Array<Record<string, unknown>> = [];
  const record = (...args: unknown[]) => lines.push(args[0] as Record<string, unknown>);
  const operator = new RedisLockProvider({
    url: `redis://${proxy.address}`,
    callTimeoutMs: 300,
    logger: { info: record, warn: record, error: record },
  });
  const [a, b] = await Promise.all([connect(url), connect(url)]);
  providers.push(operator, a, b);
  const key = uniqueKey('force-unknown');
  await operator.inspect(key); // connected before the replies slow down
  const holderA = await a.acquire(key, { ttlMs: 6_000 });
  const waitingB = b.acquire(key, { ttlMs: 6_000 });
  await new Promise((r) => setTimeout(r, 300)); // B queued
  proxy.setMode({ kind: 'delay', direction: 'toClient', ms: 800 });
  const first = await operator.forceRelease(key, { reason: 'stuck A' }).then(
    () => 'resolved',
    (error: Error & { code?: string }) => error.code ?? error.name,
  );
  expect(first).toBe('BACKEND_UNAVAILABLE');
  expect(lines.filter((l) => l.event === 'force-release-unknown')).toEqual([
    expect.objectContaining({ key, reason: 'stuck A' }),
  ]);
  const holderB = await waitingB; // the removal was applied: B got the lock
  await new Promise((r) => setTimeout(r, 1_200)); // the late reply is in
  proxy.setMode({ kind: 'pass' });
  const retry = await operator.forceRelease(key, {
    reason: 'stuck A (retry)',
    fencingToken: holderA.fencingToken,
  });
  expect(retry).toBeNull(); // A's grant is gone; B's is not touched
  expect((await operator.inspect(key))?.holder?.fencingToken).toBe(holderB.fencingToken);
  await holderB.release();
}, 30_000);
