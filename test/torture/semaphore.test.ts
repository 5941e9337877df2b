import { describe, expect, it } from 'vitest';
import type { Rule } from '../../torture/checker.js';
import type { TortureEvent } from '../../torture/history.js';
import type { TortureReport } from '../../torture/run.js';
import { checkSemaphoreHistory } from '../../torture/workloads/semaphore.js';
import {
  checkPermitsOverLimit as checkOverLimit,
  checkPermitsReturn,
  checkPermitTokens,
} from '../../torture/workloads/semaphore-rules.js';
import { tortureReport } from './runner.js';

// The semaphore workload's rules on hand-made histories (each red on a bad one, green on a good
// one), then its controls and one short run on a real backend through the built runner.
const LIMITS = { s: 2 };
const RETURN = { limits: LIMITS, ttlMs: 2_000, boundMs: 5_000 };

const request = (t: number, worker: string, permits = 1): TortureEvent => ({
  type: 'request',
  t,
  worker,
  key: 's',
  permits,
  wait: true,
});
const grant = (t: number, worker: string, token: number, permits = 1): TortureEvent => ({
  type: 'grant',
  t,
  worker,
  key: 's',
  grant: `${worker}#${token}`,
  kind: 'permit',
  token: String(token),
  abortedAtGrant: false,
  permits,
});
const release = (t: number, worker: string, token: number): TortureEvent => ({
  type: 'release',
  t,
  worker,
  grant: `${worker}#${token}`,
});
const abort = (t: number, worker: string, token: number): TortureEvent => ({
  type: 'abort',
  t,
  worker,
  grant: `${worker}#${token}`,
  reason: 'lost',
});
const write = (t: number, worker: string, token: number, live: boolean): TortureEvent => ({
  type: 'write',
  t,
  tEnd: t + 1,
  worker,
  key: 's',
  grant: `${worker}#${token}`,
  token: String(token),
  live,
  result: 'accepted',
});
const failed = (t: number, worker: string, code: string): TortureEvent => ({
  type: 'acquire-error',
  t,
  worker,
  key: 's',
  code,
});
const fault = (t: number, tEnd: number, kind: string, pausedWorkers: string[] = []): TortureEvent => ({
  type: 'fault',
  t,
  tEnd,
  kind,
  target: kind,
  pausedWorkers,
});
const kill = (t: number, worker: string): TortureEvent => ({
  type: 'crash',
  t,
  worker,
  detail: 'exit SIGKILL',
});

const rules = (violations: { rule: Rule }[]) => violations.map((v) => v.rule);

describe('semaphore rules', () => {
  describe('over-limit', () => {
    it('counts permits, not grants: 1 + 1 fits a limit of 2, 1 + 2 does not', () => {
      const fits = [grant(0, 'a', 1), write(5, 'a', 1, true), grant(10, 'b', 2), write(15, 'a', 1, true)];
      expect(checkOverLimit(fits, LIMITS)).toEqual([]);
      const over = [grant(0, 'a', 1), write(5, 'a', 1, true), grant(10, 'b', 2, 2), write(15, 'a', 1, true)];
      expect(rules(checkOverLimit(over, LIMITS))).toEqual(['over-limit']);
      // Granted at the same instant: both believed held then, whatever came next.
      expect(rules(checkOverLimit([grant(0, 'a', 1), grant(0, 'b', 2, 2)], LIMITS))).toContain('over-limit');
    });

    it("a grant's belief ends at its holder's last live check, not at its signal's abort stamp", () => {
      // a never acted on its belief after b was granted: its abort timer, late on a busy machine,
      // stamped after b's grant, but no write of a's checked it live then.
      const lateAbort = [
        grant(0, 'a', 1, 2),
        write(5, 'a', 1, true),
        grant(20, 'b', 2, 2),
        abort(30, 'a', 1),
      ];
      expect(checkOverLimit(lateAbort, LIMITS)).toEqual([]);
      const releasedAfter = [grant(0, 'a', 1, 2), grant(20, 'b', 2, 2), release(30, 'a', 1)];
      expect(checkOverLimit(releasedAfter, LIMITS)).toEqual([]);
      // a checked its signal live after b was granted: both believed held at b's grant.
      const stillLive = [
        grant(0, 'a', 1, 2),
        grant(20, 'b', 2, 2),
        write(25, 'a', 1, true),
        abort(30, 'a', 1),
      ];
      expect(rules(checkOverLimit(stillLive, LIMITS))).toEqual(['over-limit']);
      // A write that found the signal aborted is no belief.
      const sawLost = [grant(0, 'a', 1, 2), grant(20, 'b', 2, 2), write(25, 'a', 1, false)];
      expect(checkOverLimit(sawLost, LIMITS)).toEqual([]);
    });

    it("a frozen holder's own view is not trusted past the freeze: its belief ends at its last live write before it", () => {
      const frozen = [
        grant(0, 'a', 1, 2),
        write(5, 'a', 1, true),
        fault(10, 5_000, 'pauseHolder', ['a']),
        grant(3_000, 'b', 2, 2),
        write(5_010, 'a', 1, true), // woke believing; the storage's fencing answers for this write
        abort(5_020, 'a', 1),
      ];
      expect(checkOverLimit(frozen, LIMITS)).toEqual([]);
      const liveAfter = frozen.map((e) => (e.type === 'write' && e.t === 5 ? write(3_500, 'a', 1, true) : e));
      const notFrozenThen = [
        ...liveAfter.filter((e) => e.type !== 'fault'),
        fault(4_000, 5_000, 'pauseHolder', ['a']),
      ];
      expect(rules(checkOverLimit(notFrozenThen, LIMITS))).toContain('over-limit');
    });

    it("a killed holder's belief ends at its death", () => {
      const killed = [grant(0, 'a', 1, 2), write(5, 'a', 1, true), kill(10, 'a'), grant(3_000, 'b', 2, 2)];
      expect(checkOverLimit(killed, LIMITS)).toEqual([]);
    });
  });

  describe('tokens', () => {
    it('a token granted twice is red', () => {
      const twice = [request(0, 'a'), grant(1, 'a', 5), request(2, 'b'), grant(3, 'b', 5)];
      // Same token under another grant id.
      const second = { ...(twice[3] as Extract<TortureEvent, { type: 'grant' }>), grant: 'b#9' };
      expect(rules(checkPermitTokens([...twice.slice(0, 3), second]))).toContain('tokens');
    });

    it('concurrent grants may arrive out of token order; a grant requested after another arrived may not', () => {
      const concurrent = [request(0, 'a'), request(1, 'b'), grant(5, 'b', 8), grant(6, 'a', 7)];
      expect(checkPermitTokens(concurrent)).toEqual([]);
      const later = [request(0, 'a'), grant(5, 'a', 8), request(6, 'b'), grant(7, 'b', 7)];
      expect(rules(checkPermitTokens(later))).toEqual(['tokens']);
    });
  });

  describe('permits-return', () => {
    // a holds one permit of 2 and is killed at 1000; the probe p asks for both at 1500.
    const killed = [grant(0, 'a', 1), kill(1_000, 'a'), request(1_500, 'p', 2)];

    it('green when the probe gets every permit within the bound after the dead lease ran out', () => {
      expect(checkPermitsReturn([...killed, grant(6_000, 'p', 2, 2)], RETURN)).toEqual([]);
    });

    it("red when the dead holder's permits do not come back within lease + bound", () => {
      const stuck = [...killed, failed(15_000, 'p', 'LOCK_TIMEOUT')];
      expect(rules(checkPermitsReturn(stuck, RETURN))).toEqual(['permits-return']);
      const late = [...killed, grant(9_000, 'p', 2, 2)]; // ready at 3000, bound 5000
      expect(rules(checkPermitsReturn(late, RETURN))).toEqual(['permits-return']);
    });

    it('not judged when another fault could explain the wait, or the answer came before the deadline', () => {
      const disturbed = [
        ...killed,
        fault(4_000, 6_000, 'partitionWorker'),
        failed(15_000, 'p', 'LOCK_TIMEOUT'),
      ];
      expect(checkPermitsReturn(disturbed, RETURN)).toEqual([]);
      const cancelledEarly = [...killed, failed(4_000, 'p', 'ABORT')];
      expect(checkPermitsReturn(cancelledEarly, RETURN)).toEqual([]);
      const probeKilled = [...killed, kill(4_000, 'p')];
      expect(checkPermitsReturn(probeKilled, RETURN)).toEqual([]);
    });

    it('counts the requests it judged: a grant in time or a violation, not what it stood aside for', () => {
      const count = (events: TortureEvent[]) => {
        const tally = { judged: 0 };
        checkPermitsReturn(events, { ...RETURN, tally });
        return tally.judged;
      };
      expect(count([...killed, grant(6_000, 'p', 2, 2)])).toBe(1);
      expect(count([...killed, failed(15_000, 'p', 'LOCK_TIMEOUT')])).toBe(1);
      expect(count([...killed, failed(4_000, 'p', 'ABORT')])).toBe(0);
      expect(
        count([...killed, fault(4_000, 6_000, 'partitionWorker'), failed(15_000, 'p', 'LOCK_TIMEOUT')]),
      ).toBe(0);
    });

    it('only kills of the name holders move the moment it must be whole', () => {
      const holderKilledLater = [...killed, grant(1_600, 'b', 2), kill(2_500, 'b'), grant(9_000, 'p', 3, 2)];
      expect(checkPermitsReturn(holderKilledLater, RETURN)).toEqual([]); // ready 4500: 9000 is in time
      const idleKilled = [...killed, kill(2_500, 'c'), grant(9_000, 'p', 3, 2)];
      expect(rules(checkPermitsReturn(idleKilled, RETURN))).toEqual(['permits-return']);
    });
  });

  it('born-lost: a grant found aborted is red, unless its hand-out straddled a whole-process stall', () => {
    const options = { progressBoundMs: 10_000, ttlMs: 2_000 };
    const lost = {
      ...(grant(3_000, 'a', 1) as Extract<TortureEvent, { type: 'grant' }>),
      abortedAtGrant: true,
    };
    const events = [request(0, 'a'), lost, release(3_010, 'a', 1), request(3_020, 'a'), grant(3_030, 'a', 2)];
    expect(rules(checkSemaphoreHistory(events, options).violations)).toEqual(['born-lost']);
    // The stall landed between the library's last check and the worker's read of the signal.
    const inStall = [...events, fault(5, 3_001, 'stallProcess', ['a'])];
    expect(checkSemaphoreHistory(inStall, options).violations).toEqual([]);
    const otherWorker = [...events, fault(5, 3_001, 'stallProcess', ['b'])];
    expect(rules(checkSemaphoreHistory(otherWorker, options).violations)).toEqual(['born-lost']);
    // A SIGSTOP stops a forked worker between two instructions, never between the library's
    // check and the read of the signal: a grant it records aborted was handed out aborted.
    const inSigstop = [...events, fault(5, 3_001, 'pauseHolder', ['a'])];
    expect(rules(checkSemaphoreHistory(inSigstop, options).violations)).toEqual(['born-lost']);
  });

  it('the workload check: leftovers are red; tokens and overlap of checkHistory do not apply', () => {
    const events = [
      request(0, 'a'),
      request(1, 'b'),
      grant(5, 'b', 8),
      grant(6, 'a', 7),
      release(10, 'a', 7),
      release(11, 'b', 8),
    ];
    const options = { progressBoundMs: 10_000, ttlMs: 2_000 };
    expect(checkSemaphoreHistory(events, options).violations).toEqual([]);
    const leftover: TortureEvent = { type: 'leftover', t: 20, workload: 'semaphore', detail: 's: waiters 1' };
    expect(rules(checkSemaphoreHistory([...events, leftover], options).violations)).toEqual(['leftover']);
  });
});

// Through the built runner, as `npm run torture` runs it.
const SEED = 20261201;

/** Runs the runner on the semaphore workload with `args`; its report. */
const torture = (args: string[]) =>
  tortureReport(['--seed', String(SEED), '--workload', 'semaphore', ...args], { timeoutMs: 120_000 });

const ruleSet = (report: TortureReport) => new Set(report.violations.map((v) => v.rule));

describe('semaphore torture', () => {
  it('the controls go red on memory: over-grant, token-reuse, long-lease, abandon', async () => {
    // Side by side: each is one in-process run with gross violations, not a timing.
    const memory = ['--backend', 'memory', '--seconds', '6'];
    const [overGrant, tokenReuse, longLease, abandon] = await Promise.all([
      torture([...memory, '--no-nemesis', '--unsafe', 'over-grant']),
      torture([...memory, '--no-nemesis', '--unsafe', 'token-reuse']),
      // Long enough for a killed holder's permits to be judged: lease + permits-return's 12 s bound.
      torture(['--backend', 'memory', '--seconds', '30', '--faults', 'killWorker', '--unsafe', 'long-lease']),
      torture([...memory, '--no-nemesis', '--unsafe', 'abandon']),
    ]);
    expect(ruleSet(overGrant).has('over-limit')).toBe(true);
    expect(ruleSet(tokenReuse).has('tokens')).toBe(true);
    expect(ruleSet(longLease).has('permits-return')).toBe(true);
    const leftovers = abandon.violations.filter((v) => v.rule === 'leftover').map((v) => v.message);
    expect(leftovers.some((m) => /"waiters":[1-9]/.test(m) && /"holders":\[\{/.test(m))).toBe(true);
  }, 120_000);
});
