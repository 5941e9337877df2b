import { describe, expect, it } from 'vitest';
import { LockLostError } from '../../src/errors.js';
import { LeaseKeeper } from '../../src/idempotency/lease-keeper.js';
import { eventually } from '../../src/testing/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// One timer per lease (renewal or deadline, whichever comes first) and a signal made on first read.
describe('LeaseKeeper', () => {
  it('renews every leaseMs/3 and keeps the lease while renewals succeed', async () => {
    let renewals = 0;
    const lease = new LeaseKeeper('k', 1n, 150, performance.now(), undefined, async () => {
      renewals++;
      return true;
    });
    try {
      await eventually('three renewals', async () => renewals >= 3, 10_000);
      expect(lease.signal.aborted).toBe(false);
    } finally {
      lease.stop();
    }
  });

  it('a signal first read after a takeover is already aborted (revoked)', async () => {
    let asked = false;
    const lease = new LeaseKeeper('k', 2n, 150, performance.now(), undefined, async () => {
      asked = true;
      return false; // another request holds the record now
    });
    try {
      await eventually('the renewal was refused', async () => asked, 10_000);
      await sleep(10);
      const signal = lease.signal;
      expect(signal.aborted).toBe(true);
      expect(signal.reason).toBeInstanceOf(LockLostError);
      expect((signal.reason as LockLostError).reason).toBe('revoked');
    } finally {
      lease.stop();
    }
  });

  it('a renewal that never answers: the signal aborts at the deadline (unconfirmed)', async () => {
    const lease = new LeaseKeeper(
      'k',
      3n,
      150,
      performance.now(),
      undefined,
      () => new Promise(() => undefined),
    );
    try {
      const signal = lease.signal; // read before: aborted in place
      await eventually('lost', async () => signal.aborted, 10_000);
      expect((signal.reason as LockLostError).reason).toBe('unconfirmed');
    } finally {
      lease.stop();
    }
  });

  it('a lease begun too long ago is lost at once, before any renewal', async () => {
    let renewals = 0;
    const lease = new LeaseKeeper('k', 4n, 150, performance.now() - 1_000, undefined, async () => {
      renewals++;
      return true;
    });
    try {
      await eventually('lost', async () => lease.signal.aborted, 10_000);
      expect(renewals).toBe(0);
    } finally {
      lease.stop();
    }
  });

  it("the parent's abort reaches a signal read before or after it", async () => {
    const parent = new AbortController();
    const early = new LeaseKeeper('k', 5n, 60_000, performance.now(), parent.signal, async () => true);
    const late = new LeaseKeeper('k', 6n, 60_000, performance.now(), parent.signal, async () => true);
    try {
      const read = early.signal;
      parent.abort(new Error('caller gave up'));
      expect(read.aborted).toBe(true);
      expect(late.signal.aborted).toBe(true);
    } finally {
      early.stop();
      late.stop();
    }
  });
});
