import { MemoryLockProvider } from 'fencekit';
import { Redlock } from 'fencekit/compat/redlock';
import { MemoryLockServer } from 'fencekit/testing';
import { afterEach, describe, expect, it } from 'vitest';
import type { Rule } from '../../torture/checker.js';
import type { TortureEvent } from '../../torture/history.js';
import type { TortureReport } from '../../torture/run.js';
import { Belief } from '../../torture/workloads/belief.js';
import { expiryFromCallStart } from '../../torture/workloads/expiry-from-call-start.js';
import { checkFacades } from '../../torture/workloads/facades.js';
import { checkOverLimit, checkPermitTokens } from '../../torture/workloads/over-limit.js';
import { tortureReport } from './runner.js';

// The facades workload: its rules on hand-made histories (each red on a bad one, green on the good
// one), its control wrapper on its own, and short runs through the built runner: both controls
// red, a run on Redis under faults green.
const opts = { progressBoundMs: 1_000 };

type Grant = Extract<TortureEvent, { type: 'grant' }>;
type Write = Extract<TortureEvent, { type: 'write' }>;

function grant(t: number, worker: string, token: number, extra: Partial<Grant> = {}): Grant {
  return {
    type: 'grant',
    t,
    worker,
    key: 'mutex:f0',
    grant: `${worker}#${token}`,
    kind: 'lock',
    token: String(token),
    abortedAtGrant: false,
    ...extra,
  };
}
function permit(t: number, worker: string, token: number, permits: number): Grant {
  return grant(t, worker, token, { key: 'semaphore:s0', kind: 'permit', permits });
}
function write(t: number, of: Grant, live = true, result: Write['result'] = 'accepted'): Write {
  return {
    type: 'write',
    t,
    tEnd: t + 1,
    worker: of.worker,
    key: of.key,
    grant: of.grant,
    token: of.token,
    live,
    result,
  };
}
const rulesOf = (events: TortureEvent[]): Rule[] => checkFacades(events, opts).violations.map((v) => v.rule);

describe('facades checker', () => {
  it('accepts locks one after another and permits within the limit', () => {
    const a = grant(0, 'a', 1);
    const b = grant(30, 'b', 2);
    const [p, q] = [permit(0, 'c', 5, 2), permit(5, 'd', 4, 1)]; // tokens need not rise for permits
    const events = [a, write(10, a), b, write(40, b), p, q, write(20, p), write(25, q, true, 'rejected')];
    expect(checkFacades(events, opts).violations).toEqual([]);
  });

  it('a facade lock handed out already expired is born-lost', () => {
    expect(rulesOf([grant(0, 'a', 1, { abortedAtGrant: true }), grant(10, 'b', 2)])).toEqual(['born-lost']);
  });

  it('two lock holders live at once, whichever facade, overlap; lock tokens must rise', () => {
    const a = grant(0, 'a', 2);
    const b = grant(10, 'b', 1);
    expect(new Set(rulesOf([a, b, write(20, a), write(25, b, true, 'rejected')]))).toEqual(
      new Set(['tokens', 'overlap']),
    );
  });

  it('permits overlap by design: no overlap rule on them', () => {
    const [p, q] = [permit(0, 'a', 1, 1), permit(5, 'b', 2, 1)];
    expect(rulesOf([p, q, write(20, p), write(20, q)])).toEqual([]);
  });

  it('over-limit: more permits believed held at once than the limit', () => {
    const held = [permit(0, 'a', 1, 2), permit(5, 'b', 2, 1), permit(10, 'c', 3, 1)];
    const writes = held.map((g) => write(50, g));
    const found = checkOverLimit(held, writes, [], () => 3);
    expect(found.map((v) => v.rule)).toEqual(['over-limit']);
    expect(found[0]?.message).toContain('4 permits believed held at once (limit 3)');
    expect(checkOverLimit(held, writes, [], () => 4)).toEqual([]);
  });

  it('over-limit: a belief ends at its last live write, a lost or frozen view does not count', () => {
    const [a, b, c] = [permit(0, 'a', 1, 2), permit(5, 'b', 2, 1), permit(10, 'c', 3, 1)];
    const ended = [write(8, a), write(50, b), write(50, c), write(60, a, false)];
    expect(checkOverLimit([a, b, c], ended, [], () => 3)).toEqual([]);
    const bornLost = { ...a, abortedAtGrant: true };
    expect(checkOverLimit([bornLost, b, c], [write(50, b), write(50, c)], [], () => 3)).toEqual([]);
    const frozen: Extract<TortureEvent, { type: 'fault' }> = {
      type: 'fault',
      t: 3,
      tEnd: 40,
      kind: 'pauseHolder',
      target: 'a',
      pausedWorkers: ['a'],
    };
    const writes = [write(50, a), write(50, b), write(50, c)];
    expect(checkOverLimit([a, b, c], writes, [frozen], () => 3)).toEqual([]);
    expect(checkOverLimit([a, b, c], writes, [], () => 3)).toHaveLength(1);
  });

  it('permit tokens: unique per name, in any order', () => {
    expect(checkPermitTokens([permit(0, 'a', 2, 1), permit(1, 'b', 1, 1)])).toEqual([]);
    const twice = checkPermitTokens([permit(0, 'a', 2, 1), permit(1, 'b', 2, 1)]);
    expect(twice.map((v) => v.rule)).toEqual(['tokens']);
  });

  it("a belief ends at its lease's end, a lost signal, or a read that says expired", () => {
    expect(new Belief({ until: performance.now() - 1 }).live()).toBe(false); // monotonic clock
    expect(new Belief({ lost: [AbortSignal.abort()] }).live()).toBe(false);
    expect(new Belief({ reads: () => false }).live()).toBe(false);
    const extended = new Belief({ until: performance.now() + 60_000 });
    extended.moveUntil(performance.now() - 1); // an extend() whose lease is already over
    expect(extended.live()).toBe(false);
    const belief = new Belief({});
    expect(belief.live()).toBe(true);
    belief.end('released');
    expect(belief.signal.aborted).toBe(true);
  });
});

describe('the expiry-from-call-start control wrapper', () => {
  let provider: MemoryLockProvider | undefined;
  afterEach(async () => provider?.close());

  it('hands out a lock that waited longer than its duration already expired; the facade does not', async () => {
    provider = new MemoryLockProvider({ server: new MemoryLockServer() });
    const shipped = new Redlock(provider, { retryCount: 50, retryDelay: 100 });
    const broken = expiryFromCallStart(shipped);
    for (const redlock of [shipped, broken]) {
      const first = await redlock.acquire(['r'], 5_000);
      const waiting = redlock.acquire(['r'], 300); // queued past its 300 ms
      await new Promise((done) => setTimeout(done, 600));
      await first.release();
      const second = await waiting;
      const expired = second.expiration <= Date.now();
      expect(expired).toBe(redlock === broken);
      await second.release().catch(() => undefined); // the broken one gave itself back already
    }
  });
});

describe('facades runs', () => {
  /** The facades report of a run of the built runner with `args`. */
  const torture = (args: string[]) =>
    tortureReport(['--workload', 'facades', ...args], { timeoutMs: 60_000 });
  const rules = (report: TortureReport) => new Set(report.violations.map((v) => v.rule));

  // Side by side (each is mostly waiting: quiet tail, leases running out), to keep the file short.
  it.concurrent('control: an expiration counted from the call hands out locks already expired (born-lost)', async () => {
    const args = ['--backend', 'memory', '--seconds', '6', '--seed', '2'];
    const report = await torture([...args, '--unsafe', 'expiry-from-call-start']);
    expect(rules(report).has('born-lost')).toBe(true);
  }, 90_000);

  it.concurrent('control: semaphores built with one permit more than the app counts on go over its limit', async () => {
    const args = ['--backend', 'memory', '--seconds', '4', '--seed', '2'];
    const report = await torture([...args, '--unsafe', 'permits-over-limit']);
    expect(rules(report).has('over-limit')).toBe(true);
  }, 90_000);
});
