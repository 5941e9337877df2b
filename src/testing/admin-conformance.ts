import assert from 'node:assert/strict';
import type { LockLostError } from '../errors.js';
import type { ProviderEventMap } from '../events.js';
import type { LockProvider } from '../types.js';
import { eventually, rejectsWith, uniqueKey, waitersReach } from './helpers.js';
import type { ConformanceTarget, TestApi } from './target.js';

type AdminProvider = LockProvider & Required<Pick<LockProvider, 'forceRelease' | 'list'>>;

/** Audit lines the process's warning channel carried (type 'FencekitAudit') while `run` ran. */
async function auditLines<T>(run: () => Promise<T>): Promise<{ result: T; lines: () => string[] }> {
  const lines: string[] = [];
  const listener = (warning: Error) => {
    if (warning.name === 'FencekitAudit') lines.push(warning.message);
  };
  process.on('warning', listener);
  try {
    const result = await run();
    // Warnings are delivered on a later tick: wait for ours before returning.
    await eventually('the audit line', async () => lines.length > 0, 2_000);
    return { result, lines: () => [...lines] };
  } finally {
    process.off('warning', listener);
  }
}

/**
 * The operator's tools: forceRelease and list. A provider without them skips these
 * tests (they are optional for custom providers).
 */
export function describeAdministration(
  target: ConformanceTarget,
  t: TestApi,
  open: () => Promise<LockProvider>,
): void {
  const ttl = { ttlMs: target.ttlMs };
  const revokedReason = target.revokedReason ?? 'revoked';
  /** The providers, or undefined when this backend lacks the method (the test then passes as skipped). */
  const openAdmin = async (count: number, method: 'forceRelease' | 'list') => {
    const providers: AdminProvider[] = [];
    for (let i = 0; i < count; i++) providers.push((await open()) as AdminProvider);
    return typeof providers[0]?.[method] === 'function' ? providers : undefined;
  };

  t.describe('administration', () => {
    t.it(
      `forceRelease removes the holder's grant (signal: ${revokedReason}), grants the waiter a higher token, records who and why`,
      async () => {
        const providers = await openAdmin(3, 'forceRelease');
        if (!providers) return;
        const [a, b, operator] = providers as [AdminProvider, AdminProvider, AdminProvider];
        const key = uniqueKey('force');
        const holder = await a.acquire(key, { ...ttl, owner: 'stuck-worker' });
        // b has reached the backend: under load, a first attempt that misses callTimeoutMs is not retried.
        await b.inspect(key);
        const waiting = b.acquire(key, ttl);
        await waitersReach(operator, key, 1);
        const events: Array<ProviderEventMap['force-release']> = [];
        operator.on?.('force-release', (event) => events.push(event));
        const { result: removed, lines } = await auditLines(() =>
          operator.forceRelease(key, { reason: 'job stuck since 03:00', by: 'ops@bastion' }),
        );
        assert.ok(removed, 'forceRelease resolves with the removed holder');
        assert.equal(removed.fencingToken, holder.fencingToken);
        assert.equal(removed.owner, 'stuck-worker');
        const next = await waiting;
        assert.ok(next.fencingToken > holder.fencingToken, `${next.fencingToken} > ${holder.fencingToken}`);
        await eventually(
          'the holder hears of it',
          async () => holder.signal.aborted,
          target.holderDeathBoundMs,
        );
        assert.equal((holder.signal.reason as LockLostError).reason, revokedReason);
        assert.equal(holder.held, false);
        if (operator.on) {
          assert.deepEqual(events, [
            {
              backend: operator.backend,
              key,
              owner: 'stuck-worker',
              fencingToken: holder.fencingToken,
              reason: 'job stuck since 03:00',
              by: 'ops@bastion',
            },
          ]);
        }
        const line = lines().find((l) => l.includes(JSON.stringify(key)));
        assert.ok(line, `an audit line names the key: ${JSON.stringify(lines())}`);
        assert.match(line, /ops@bastion/);
        assert.match(line, /job stuck since 03:00/);
        assert.match(line, new RegExp(`token ${holder.fencingToken}\\b`));
        // The revoked holder's own release resolves and does not touch the new grant.
        await holder.release();
        assert.ok(next.held);
        assert.equal((await operator.inspect(key))?.holder?.fencingToken, next.fencingToken);
        await next.release();
      },
    );

    t.it('forceRelease is refused without a reason, and the grant stays', async () => {
      const providers = await openAdmin(2, 'forceRelease');
      if (!providers) return;
      const [a, operator] = providers as [AdminProvider, AdminProvider];
      const key = uniqueKey('force-no-reason');
      const lock = await a.acquire(key, ttl);
      const refusals: unknown[] = [undefined, {}, { reason: '' }, { reason: '  \n' }, { reason: 42 }];
      for (const options of refusals) {
        const error = await rejectsWith(operator.forceRelease(key, options as never), 'INVALID_ARGUMENT');
        assert.ok(['reason', 'options'].includes((error as { argument?: string }).argument ?? ''));
      }
      await rejectsWith(operator.forceRelease(key, { reason: 'x', typo: 1 } as never), 'INVALID_ARGUMENT');
      await rejectsWith(operator.forceRelease('a/../b', { reason: 'x' }), 'INVALID_ARGUMENT');
      assert.ok(lock.held);
      assert.equal((await operator.inspect(key))?.holder?.fencingToken, lock.fencingToken);
      await lock.release();
    });

    t.it('forceRelease of a free key resolves null and records nothing', async () => {
      const providers = await openAdmin(1, 'forceRelease');
      if (!providers) return;
      const [operator] = providers as [AdminProvider];
      const events: unknown[] = [];
      operator.on?.('force-release', (event) => events.push(event));
      assert.equal(await operator.forceRelease(uniqueKey('force-free'), { reason: 'cleanup' }), null);
      assert.deepEqual(events, []);
    });

    t.it(
      'forceRelease never removes a newer grant: the holder it saw released and someone else acquired',
      async () => {
        const providers = await openAdmin(3, 'forceRelease');
        if (!providers) return;
        const [a, b, operator] = providers as [AdminProvider, AdminProvider, AdminProvider];
        const key = uniqueKey('force-race');
        const first = await a.acquire(key, ttl);
        // The operator looks (as `fencekit inspect` does), then the key changes hands before it acts.
        const seen = (await operator.inspect(key))?.holder?.fencingToken;
        assert.equal(seen, first.fencingToken);
        await first.release();
        const second = await b.acquire(key, ttl);
        assert.equal(await operator.forceRelease(key, { reason: 'stale look', fencingToken: seen }), null);
        assert.ok(second.held, 'the newer grant stays held');
        assert.equal(second.signal.aborted, false);
        assert.equal((await operator.inspect(key))?.holder?.fencingToken, second.fencingToken);
        // With the token it holds now, the same call removes it.
        const removed = await operator.forceRelease(key, {
          reason: 'now',
          fencingToken: second.fencingToken,
        });
        assert.equal(removed?.fencingToken, second.fencingToken);
        await second.release(); // revoked: release still resolves (never removes another grant)
      },
    );

    t.it('list shows the held names under a prefix, not the released ones', async () => {
      const providers = await openAdmin(2, 'list');
      if (!providers) return;
      const [a, operator] = providers as [AdminProvider, AdminProvider];
      const prefix = `${uniqueKey('list')}/`;
      const names = [`${prefix}alpha`, `${prefix}beta`, `${prefix}nested/gamma`];
      const locks = await Promise.all(names.map((name) => a.acquire(name, ttl)));
      const elsewhere = await a.acquire(`${uniqueKey('list-other')}`, ttl);
      assert.deepEqual(await operator.list(prefix), names);
      await locks[1]?.release();
      assert.deepEqual(await operator.list(prefix), [names[0], names[2]]);
      assert.deepEqual(await operator.list(`${prefix}nested/`), [names[2]]);
      const all = await operator.list();
      assert.ok(all.includes(names[0] as string) && all.includes(elsewhere.key));
      await rejectsWith(operator.list(42 as never), 'INVALID_ARGUMENT');
      await Promise.all([...locks, elsewhere].map((lock) => lock.release()));
      assert.deepEqual(await operator.list(prefix), []);
    });
  });
}
