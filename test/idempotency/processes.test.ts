import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotencyStore } from '../../src/idempotency/index.js';
import { eventually } from '../../src/testing/index.js';
import { type StoreBackend, startStoreServers } from './backends.js';

// Real processes against real servers: 5 × 10 concurrent requests with one key, and a first run
// killed or paused mid-fn past its lease. The children import the built package (npm test builds first).
const childScript = resolve(import.meta.dirname, 'child.mjs');

interface Event {
  pid: number;
  ready?: boolean;
  ran?: string;
  result?: unknown;
  error?: string;
  resumedWithSignalAborted?: boolean;
}

function startChild(args: string[]): { child: ChildProcess; events: Event[] } {
  const child = spawn(process.execPath, [childScript, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const events: Event[] = [];
  let partial = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString();
    const complete = text.split('\n');
    partial = complete.pop() ?? '';
    for (const line of complete) if (line.trim()) events.push(JSON.parse(line) as Event);
  });
  return { child, events };
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => child.once('exit', () => r()));

let servers: Awaited<ReturnType<typeof startStoreServers>>;
const children: ChildProcess[] = [];
beforeAll(async () => {
  servers = await startStoreServers();
});
afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await servers?.stop();
});

describe.each<StoreBackend>(['redis', 'postgres', 'etcd'])(
  'idempotency with real processes on %s',
  (backend) => {
    async function burst(waitMs: number) {
      const key = `burst-${crypto.randomUUID()}`;
      const procs = Array.from({ length: 5 }, () =>
        startChild([servers.urls[backend], key, 'burst', JSON.stringify({ count: 10, waitMs })]),
      );
      children.push(...procs.map((p) => p.child));
      const all = () => procs.flatMap((p) => p.events);
      await eventually('5 processes ready', async () => all().filter((e) => e.ready).length === 5, 15_000);
      for (const p of procs) p.child.stdin?.write('go\n');
      await Promise.all(procs.map((p) => exited(p.child)));
      const answers = all().filter((e) => 'result' in e || 'error' in e);
      return { runs: all().filter((e) => e.ran), answers };
    }

    it('50 concurrent requests with one key (5 processes × 10 connections), waitMs: fn runs once, all 50 get its result', async () => {
      const { runs, answers } = await burst(10_000);
      expect(runs).toHaveLength(1);
      expect(answers).toHaveLength(50);
      const expected = { charge: `ch_${runs[0]?.pid}_${runs[0]?.ran}` };
      expect(answers.map((a) => a.result)).toEqual(Array(50).fill(expected));
    }, 40_000);

    it('50 concurrent requests without waitMs: fn runs once; the others get its result or 409 (in flight)', async () => {
      const { runs, answers } = await burst(0);
      expect(runs).toHaveLength(1);
      expect(answers).toHaveLength(50);
      const expected = { charge: `ch_${runs[0]?.pid}_${runs[0]?.ran}` };
      for (const answer of answers) {
        if ('error' in answer) expect(answer.error).toBe('IDEMPOTENCY_IN_FLIGHT');
        else expect(answer.result).toEqual(expected);
      }
      expect(answers.filter((a) => 'result' in a).length).toBeGreaterThanOrEqual(1);
    }, 40_000);

    it.each(['SIGKILL', 'SIGSTOP'] as const)(
      'a first run %s-ed mid-fn past its lease is taken over by a retry; a late completion is refused',
      async (signal) => {
        const key = `stall-${crypto.randomUUID()}`;
        const first = startChild([servers.urls[backend], key, 'stall', JSON.stringify({ leaseMs: 400 })]);
        children.push(first.child);
        await eventually('first run started', async () => first.events.some((e) => e.ran), 15_000);
        const firstToken = BigInt(first.events.find((e) => e.ran)?.ran as string);
        first.child.kill(signal);

        const store = await createIdempotencyStore(servers.urls[backend]);
        try {
          let retryToken = 0n;
          const value = await store.run(
            key,
            'payment',
            async ({ fencingToken }) => {
              retryToken = fencingToken;
              return 'retry';
            },
            { waitMs: 5_000, leaseMs: 400 },
          );
          expect(value).toBe('retry');
          expect(retryToken).toBeGreaterThan(firstToken);

          if (signal === 'SIGSTOP') {
            first.child.kill('SIGCONT');
            first.child.stdin?.write('go\n');
            await exited(first.child);
            expect(first.events.find((e) => 'resumedWithSignalAborted' in e)?.resumedWithSignalAborted).toBe(
              true,
            );
            expect(first.events.find((e) => 'result' in e || 'error' in e)).toMatchObject({
              error: 'STALE_FENCING_TOKEN',
            });
          }
          expect(await store.execute(key, 'payment', async () => 'third')).toEqual({
            value: 'retry',
            replayed: true,
          });
        } finally {
          await store.close();
        }
      },
      30_000,
    );
  },
);
