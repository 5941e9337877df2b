import { connect, type Lock, runAsLeader } from 'fencekit';
import { type CheckOptions, checkHistory } from '../checker.js';
import { now } from '../history.js';
import { between, pick } from '../random.js';
import { sleep } from '../sleep.js';
import { stallingProvider } from '../stall.js';
import { unsafeProvider } from '../unsafe-provider.js';
import { codeOf, type GrantRecorder, grantRecorder, recordedWrite } from './grants.js';
import type { LeftoverContext, WorkerContext, Workload } from './workload.js';

const KEYS = ['k0', 'k1'];
const ELECTION = 'leader';

/**
 * Locks: acquire → critical section → fenced write → release in a loop, through the public API
 * only; one worker in four leads through runAsLeader instead and writes each term. A worker whose
 * signal is already aborted still writes now and then: a zombie's write the storage must reject.
 */
export const lockWorkload: Workload = {
  name: 'lock',
  backends: ['memory', 'redis', 'postgres', 'etcd', 'zookeeper', 'redlock'],
  unsafe: ['no-exclusion', 'born-lost'],
  storageKeys: [...KEYS, ELECTION],
  // One worker in three leads through runAsLeader; the rest take locks.
  mode: (index) => (index % 3 === 2 ? 'leader' : 'lock'),
  run: runLockWorker,
  leftovers: async ({ provider }: LeftoverContext) => {
    const found: string[] = [];
    for (const key of KEYS) {
      const info = await provider.inspect(key).catch((error: unknown) => ({ error: String(error) }));
      if (info && ('error' in info || info.holder || info.waiters > 0))
        found.push(`${key}: ${JSON.stringify(info, bigintJson)}`);
    }
    return found;
  },
  check: (events, options: CheckOptions) => checkHistory(events, options),
};

async function runLockWorker(ctx: WorkerContext): Promise<void> {
  const { config, emit, stop, random, storage, stalls } = ctx;
  const real = await connect(config.url, config.connectOptions);
  // The last lock acquire() gave per key: a term's own lock (runAsLeader acquires through it).
  const locks = new Map<string, Lock>();
  const unsafe = config.unsafe as 'no-exclusion' | 'born-lost' | undefined;
  const provider = stallingProvider(
    unsafe ? unsafeProvider(real, unsafe) : real,
    stalls,
    config.id,
    emit,
    (lock) => locks.set(lock.key, lock),
  );
  ctx.onProvider?.(real);
  const grants: GrantRecorder = grantRecorder(config.id, emit, () => stalls.connected());
  const pause = (ms: number) => sleep(ms, stop);

  /** The critical section of one grant: a few writes, each checking the signal just before. */
  const work = async (key: string, grant: string, token: bigint, signal: AbortSignal) => {
    const writes = between(random, 1, 3);
    for (let i = 0; i < writes && !stop.aborted; i++) {
      await pause(between(random, 0, config.criticalMaxMs));
      const live = !signal.aborted;
      if (!live && random() > 0.5) return; // a well-behaved holder stops; half keep going
      await recordedWrite(storage, emit, {
        worker: config.id,
        key,
        grant,
        token,
        value: `${grant}/${i}`,
        live,
      });
    }
  };

  try {
    if (config.mode === 'leader') {
      await runAsLeader(
        provider,
        ELECTION,
        async ({ signal, term }) => {
          const lock = locks.get(ELECTION);
          const grant = grants.granted(ELECTION, 'term', term, signal, {
            ...(lock && lock.fencingToken === term ? { lockAborted: lock.signal.aborted } : {}),
          });
          await work(ELECTION, grant, term, signal);
          emit({ type: 'release', t: now(), worker: config.id, grant }); // the term ends: resign follows
        },
        { signal: stop, value: config.id, backoff: { initialMs: 50, maxMs: 500 } },
      );
      return;
    }
    while (!stop.aborted) {
      // Mostly the first key: contention, so a holder that wrongly believes it holds meets another.
      const picked = random() < 0.7 ? (KEYS[0] ?? '') : pick(random, KEYS);
      // A stalled request goes to the least used key: uncontended, its grant comes in the reply
      // that the stall holds back (a waiter's grant comes later, in a call made after the stall).
      const key = stalls.armed ? (KEYS.at(-1) ?? picked) : picked;
      emit({ type: 'request', t: now(), worker: config.id, key });
      let lock: Lock;
      try {
        lock = await provider.acquire(key, { waitMs: 5_000, signal: stop, owner: config.id });
      } catch (error) {
        if (!stop.aborted) {
          emit({ type: 'acquire-error', t: now(), worker: config.id, key, code: codeOf(error) });
          await pause(100);
        }
        continue;
      }
      const grant = grants.granted(key, 'lock', lock.fencingToken, lock.signal);
      await work(key, grant, lock.fencingToken, lock.signal);
      await lock.release().catch(() => undefined);
      emit({ type: 'release', t: now(), worker: config.id, grant });
    }
  } finally {
    await provider.close().catch(() => undefined);
  }
}

const bigintJson = (_key: string, value: unknown) => (typeof value === 'bigint' ? String(value) : value);
