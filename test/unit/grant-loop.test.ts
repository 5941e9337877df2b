import { describe, expect, it } from 'vitest';
import { monotonicNow } from '../../src/clock.js';
import { obtainGrant } from '../../src/grant-loop.js';
import { OwnedLock } from '../../src/ownership.js';
import { sessionGrant } from '../../src/session-grant.js';
import { validateAcquireOptions } from '../../src/validate.js';

/** A grant confirmed for `ms` more, which counts its releases. */
const grantFor = (ms: number, released: string[], token: bigint) => {
  const lock = new OwnedLock({
    key: 'k',
    fencingToken: token,
    ownerToken: `t${token}`,
    releaseOnBackend: async () => {
      released.push(`t${token}`);
    },
  });
  lock.confirmUntil(monotonicNow() + ms);
  return lock;
};

/** A grant of a session (etcd, ZooKeeper) whose last confirmation vouches for `ms` more. */
const sessionGrantFor = (ms: number, released: string[], token: bigint) => {
  const until = monotonicNow() + ms;
  const session = {
    get alive() {
      return monotonicNow() < until;
    },
    get trustLeftMs() {
      return Math.max(0, until - monotonicNow());
    },
  };
  return sessionGrant(session, { key: 'k', fencingToken: token, ownerToken: `t${token}` }, async () => {
    released.push(`t${token}`);
  });
};

describe.each([
  ['its own lease', grantFor],
  ['its session', sessionGrantFor],
])('the acquire loop hands out no grant about to lapse (trusted by %s)', (_by, grantFor) => {
  it('a grant with less than its hand-out margin left is released and asked for again', async () => {
    const released: string[] = [];
    // 2 ms left of a 10 s lease: its caller would read an aborted signal after a short pause.
    const answers = [grantFor(2, released, 1n), grantFor(10_000, released, 2n)];
    const options = validateAcquireOptions(
      { ttlMs: 10_000, waitMs: 5_000 },
      { ttlMs: 10_000, waitMs: 5_000 },
    );
    const lock = await obtainGrant(
      {
        backend: 'memory',
        ttlMs: 10_000,
        waitMs: 5_000,
        callTimeoutMs: 1_000,
        closeSignal: new AbortController().signal,
      },
      {
        name: 'k',
        what: 'acquire("k")',
        kind: 'lock',
        options,
        wait: true,
        attempt: async () => answers.shift() ?? null,
      },
    );
    expect(lock?.fencingToken).toBe(2n);
    expect(released).toEqual(['t1']);
    expect(answers).toEqual([]);
    await lock?.release();
  });
});
