import { describe, expect, it } from 'vitest';
import type { Rule } from '../../torture/checker.js';
import type { TortureBackend } from '../../torture/cluster.js';
import type { TortureEvent } from '../../torture/history.js';
import type { TortureReport } from '../../torture/run.js';
import { checkReadWriteHistory } from '../../torture/workloads/read-write.js';
import { checkReadWriteOverlap, checkReadWriteTokens } from '../../torture/workloads/read-write-rules.js';
import { tortureReports } from './runner.js';

// The read-write workload's rules on hand-made histories (each red on a bad one, green on a good
// one), then its controls and short runs on real backends through the built runner.
type Grant = Extract<TortureEvent, { type: 'grant' }>;

/** A grant of name 'rw' by `worker`, id `<worker>#<token>` unless `id` says otherwise. */
const grant = (
  t: number,
  worker: string,
  kind: 'read' | 'write',
  token: number,
  extra: Partial<Grant> = {},
): Grant => ({
  type: 'grant',
  t,
  worker,
  key: 'rw',
  grant: `${worker}#${token}`,
  kind,
  token: String(token),
  abortedAtGrant: false,
  ...extra,
});
const read = (t: number, worker: string, token: number, id = `${worker}#${token}`): TortureEvent => ({
  type: 'read',
  t,
  tEnd: t + 1,
  worker,
  key: 'rw',
  grant: id,
  token: String(token),
  live: true,
  seen: null,
});
const write = (
  t: number,
  worker: string,
  token: number,
  { live = true, result = 'accepted' as 'accepted' | 'rejected' } = {},
): TortureEvent => ({
  type: 'write',
  t,
  tEnd: t + 1,
  worker,
  key: 'rw',
  grant: `${worker}#${token}`,
  token: String(token),
  live,
  result,
});
const release = (t: number, worker: string, id: string): TortureEvent => ({
  type: 'release',
  t,
  worker,
  grant: id,
});
const abort = (t: number, worker: string, token: number): TortureEvent => ({
  type: 'abort',
  t,
  worker,
  grant: `${worker}#${token}`,
  reason: 'lost',
});
const pause = (t: number, tEnd: number, worker: string): TortureEvent => ({
  type: 'fault',
  t,
  tEnd,
  kind: 'pauseHolder',
  target: worker,
  pausedWorkers: [worker],
  workers: [worker],
});

const rules = (violations: { rule: Rule }[]) => violations.map((v) => v.rule);

describe('read-write rules', () => {
  describe('overlap', () => {
    it('readers overlap each other: green', () => {
      const readers = [
        grant(0, 'a', 'read', 1),
        grant(10, 'b', 'read', 2),
        read(20, 'a', 1),
        read(25, 'b', 2),
      ];
      expect(checkReadWriteOverlap(readers)).toEqual([]);
    });

    it('a write granted while a reader or a writer is believed held is red, and so is a read inside a write', () => {
      const besideReader = [grant(0, 'a', 'read', 1), grant(10, 'b', 'write', 2), read(20, 'a', 1)];
      expect(rules(checkReadWriteOverlap(besideReader))).toEqual(['overlap']);
      const besideWriter = [grant(0, 'a', 'write', 1), grant(10, 'b', 'write', 2), write(20, 'a', 1)];
      expect(rules(checkReadWriteOverlap(besideWriter))).toEqual(['overlap']);
      const readInsideWrite = [grant(0, 'a', 'write', 1), grant(10, 'b', 'read', 2), write(20, 'a', 1)];
      expect(rules(checkReadWriteOverlap(readInsideWrite))).toEqual(['overlap']);
      // Granted at the same instant: both believed held then, reported once.
      expect(rules(checkReadWriteOverlap([grant(0, 'a', 'read', 1), grant(0, 'b', 'write', 2)]))).toEqual([
        'overlap',
      ]);
      // One after the other: green.
      const inTurn = [
        grant(0, 'a', 'write', 1),
        write(5, 'a', 1),
        grant(10, 'b', 'read', 2),
        read(15, 'b', 2),
      ];
      expect(checkReadWriteOverlap(inTurn)).toEqual([]);
    });

    it('a lost grant is no holder after its last live check: a late abort stamp, a write found aborted', () => {
      const lateAbort = [
        grant(0, 'a', 'write', 1),
        write(5, 'a', 1),
        grant(20, 'b', 'read', 2),
        abort(30, 'a', 1),
        read(35, 'b', 2),
      ];
      expect(checkReadWriteOverlap(lateAbort)).toEqual([]);
      const zombie = [...lateAbort, write(40, 'a', 1, { live: false })];
      expect(checkReadWriteOverlap(zombie)).toEqual([]);
      const stillLive = [...lateAbort, write(25, 'a', 1)];
      expect(rules(checkReadWriteOverlap(stillLive))).toEqual(['overlap']);
      // Handed out already lost: never a holder (born-lost's business).
      const bornLost = [
        grant(0, 'a', 'read', 1),
        grant(5, 'b', 'write', 2, { abortedAtGrant: true }),
        read(9, 'a', 1),
      ];
      expect(checkReadWriteOverlap(bornLost)).toEqual([]);
    });

    it("a frozen holder's own view is not trusted past the freeze", () => {
      const frozen = [
        grant(0, 'a', 'write', 1),
        write(5, 'a', 1),
        pause(10, 5_000, 'a'),
        grant(3_000, 'b', 'read', 2),
        write(5_010, 'a', 1), // woke believing: fencing answers for this write
      ];
      expect(checkReadWriteOverlap(frozen)).toEqual([]);
      expect(rules(checkReadWriteOverlap(frozen.filter((e) => e.type !== 'fault')))).toEqual(['overlap']);
    });

    it('a downgrade shares its write; a writer beside the downgrade is red', () => {
      const downgrade = [
        grant(0, 'a', 'write', 1),
        write(5, 'a', 1),
        grant(10, 'a', 'read', 1, { grant: 'a#r', downgradeOf: 'a#1' }),
        write(12, 'a', 1),
        release(15, 'a', 'a#1'),
        read(30, 'a', 1, 'a#r'),
      ];
      expect(checkReadWriteOverlap(downgrade)).toEqual([]);
      expect(rules(checkReadWriteOverlap([...downgrade, grant(20, 'b', 'write', 2)]))).toEqual(['overlap']);
      // The same read, not named a downgrade, beside a live write: red.
      const notContinued = downgrade.map((e) =>
        e.type === 'grant' && e.grant === 'a#r' ? { ...e, downgradeOf: undefined } : e,
      );
      expect(rules(checkReadWriteOverlap(notContinued))).toEqual(['overlap']);
    });
  });

  describe('tokens', () => {
    it('a token granted twice is red, to readers as to writers', () => {
      expect(rules(checkReadWriteTokens([grant(0, 'a', 'read', 5), grant(1, 'b', 'read', 5)]))).toEqual([
        'tokens',
      ]);
      expect(rules(checkReadWriteTokens([grant(0, 'a', 'write', 5), grant(1, 'b', 'write', 5)]))).toEqual([
        'tokens',
      ]);
    });

    it("a downgrade's read carries its write's token, and only that one", () => {
      const downgrade = [
        grant(0, 'a', 'write', 5),
        grant(1, 'a', 'read', 5, { grant: 'a#r', downgradeOf: 'a#5' }),
      ];
      expect(checkReadWriteTokens(downgrade)).toEqual([]);
      const otherToken = [grant(0, 'a', 'write', 5), grant(1, 'a', 'read', 6, { downgradeOf: 'a#5' })];
      expect(rules(checkReadWriteTokens(otherToken))).toEqual(['tokens']);
      // A read that reuses a write's token without continuing it is a token granted twice.
      expect(rules(checkReadWriteTokens([grant(0, 'a', 'write', 5), grant(1, 'b', 'read', 5)]))).toEqual([
        'tokens',
      ]);
    });

    it("a write's token is above every token granted before it, reads' included; reads may arrive out of order", () => {
      const readsOutOfOrder = [grant(0, 'a', 'read', 8), grant(1, 'b', 'read', 7), grant(5, 'c', 'write', 9)];
      expect(checkReadWriteTokens(readsOutOfOrder)).toEqual([]);
      const belowARead = [grant(0, 'a', 'read', 8), grant(5, 'c', 'write', 7)];
      expect(rules(checkReadWriteTokens(belowARead))).toEqual(['tokens']);
      const belowAWrite = [grant(0, 'a', 'write', 8), grant(5, 'c', 'write', 7)];
      expect(rules(checkReadWriteTokens(belowAWrite))).toEqual(['tokens']);
      // A write handed out already lost holds nothing: born-lost reports it, not tokens.
      const bornLost = [grant(0, 'a', 'read', 8), grant(5, 'c', 'write', 7, { abortedAtGrant: true })];
      expect(checkReadWriteTokens(bornLost)).toEqual([]);
    });
  });

  describe('the workload check', () => {
    const options = { progressBoundMs: 10_000, ttlMs: 2_000 };
    const shared = [
      grant(0, 'a', 'read', 1),
      grant(1, 'b', 'read', 2),
      read(5, 'a', 1),
      read(6, 'b', 2),
      release(10, 'a', 'a#1'),
      release(11, 'b', 'b#2'),
      grant(20, 'c', 'write', 3),
      write(25, 'c', 3),
      release(30, 'c', 'c#3'),
    ];

    it("readers sharing is green: the lock's overlap and token order do not apply", () => {
      expect(checkReadWriteHistory(shared, options).violations).toEqual([]);
    });

    it("stale-write: a zombie writer's write accepted after a newer token's is red; rejected, green", () => {
      const zombie = [
        grant(0, 'a', 'write', 1),
        write(5, 'a', 1),
        pause(10, 5_000, 'a'),
        grant(3_000, 'b', 'write', 2),
        write(3_010, 'b', 2),
        grant(6_000, 'c', 'read', 3), // progress after the heal
      ];
      const accepted = [...zombie, write(5_010, 'a', 1)];
      expect(rules(checkReadWriteHistory(accepted, options).violations)).toEqual(['stale-write']);
      const rejected = [...zombie, write(5_010, 'a', 1, { result: 'rejected' })];
      expect(checkReadWriteHistory(rejected, options).violations).toEqual([]);
    });

    it('born-lost and leftover are held too', () => {
      const bornLost = [...shared, grant(40, 'a', 'read', 4, { abortedAtGrant: true })];
      expect(rules(checkReadWriteHistory(bornLost, options).violations)).toEqual(['born-lost']);
      const leftover: TortureEvent = {
        type: 'leftover',
        t: 50,
        workload: 'read-write',
        detail: 'rw: a reader',
      };
      expect(rules(checkReadWriteHistory([...shared, leftover], options).violations)).toEqual(['leftover']);
    });
  });
});

// Through the built runner, as `npm run torture` runs it.
const SEED = 20261201;

/** Runs the runner on the read-write workload with `args`; its report. */
async function torture(args: string[]): Promise<TortureReport> {
  const [report] = await tortureReports(['--seed', String(SEED), '--workload', 'read-write', ...args], {
    timeoutMs: 120_000,
  });
  if (!report) throw new Error('no report');
  return report;
}

const ruleSet = (report: TortureReport) => new Set(report.violations.map((v) => v.rule));
const violations = (report: TortureReport) =>
  report.violations.map((v) => `${v.rule}: ${v.message}`).slice(0, 10);

describe('read-write torture', () => {
  it('the controls go red on memory: write-shares (overlap), token-reuse (tokens)', async () => {
    const memory = ['--backend', 'memory', '--seconds', '4', '--no-nemesis'];
    const [writeShares, tokenReuse] = await Promise.all([
      torture([...memory, '--unsafe', 'write-shares']),
      torture([...memory, '--unsafe', 'token-reuse']),
    ]);
    expect(ruleSet(writeShares).has('overlap')).toBe(true);
    expect(ruleSet(tokenReuse).has('tokens')).toBe(true);
  }, 120_000);

  // Side by side: each is one short run with the backend's faults, bounded by --min-grants. Redis and
  // ZooKeeper run the workload in the every-workload runs (every-workload-*.test.ts).
  it('memory, etcd and postgres: no violation under faults, with grants', async () => {
    const backends: [TortureBackend, number][] = [
      ['memory', 5],
      ['etcd', 8],
      ['postgres', 8],
    ];
    const reports = await Promise.all(
      backends.map(([backend, seconds]) =>
        torture([
          '--backend',
          backend,
          '--seconds',
          String(seconds),
          '--min-grants',
          '3',
          '--min-faults',
          '1',
        ]),
      ),
    );
    for (const report of reports) {
      expect({ backend: report.backend, violations: violations(report) }).toEqual({
        backend: report.backend,
        violations: [],
      });
      expect({ backend: report.backend, grants: report.grants >= 3 }).toEqual({
        backend: report.backend,
        grants: true,
      });
    }
    const injected = reports.flatMap((r) => Object.values(r.faults)).reduce((a, b) => a + b, 0);
    expect(injected).toBeGreaterThan(0);
  }, 150_000);
});
