import { type AcquireOptions, connect, type Lock, type LockProvider, type ReadWriteLock } from 'fencekit';
import { type CheckOptions, type CheckResult, checkHistory } from '../checker.js';
import { now } from '../history.js';
import { between, pick } from '../random.js';
import { sleep } from '../sleep.js';
import { codeOf, type GrantRecorder, grantRecorder, recordedWrite } from './grants.js';
import { checkReadWriteOverlap, checkReadWriteTokens } from './read-write-rules.js';
import { writeShares } from './read-write-unsafe.js';
import type { LeftoverContext, WorkerContext, Workload } from './workload.js';

/** Two names, the first used most, so readers meet readers and writers meet both. */
const NAMES = ['rw-a', 'rw-b'];

/**
 * The control variants: 'write-shares' takes every write as a read (read-write-unsafe.ts);
 * 'token-reuse' records, and writes with, tokens that repeat (1 + token mod 3), as the semaphore's
 * control of that name does.
 */
type ReadWriteUnsafety = 'write-shares' | 'token-reuse';

type Mode = 'read' | 'write';
type Api = 'acquire' | 'try' | 'with';

/**
 * Read-write locks: reads and writes of two names in a loop through the public API only
 * (acquireRead / acquireWrite, their try* and with* forms), some waits cancelled by a short-lived
 * signal, and now and then a write downgraded to a read (acquireRead({ downgradeFrom })) that
 * reads on after the write is released. A writer writes the name's row of the fenced storage,
 * checking its signal just before each write (half the writers that find it aborted write anyway:
 * a zombie's write the storage must reject); a reader reads the row (a plain SELECT), checking its
 * signal just before each read. Two workers in three mostly read, the third mostly writes.
 *
 * Rules: checkHistory's (born-lost, stale-write, progress, leftover, crash) without the lock's
 * overlap and token order, plus overlap and tokens for read-write locks (read-write-rules.ts).
 * Waiting in order (no writer starved) is a matter of timing, not a rule here.
 */
export const readWriteWorkload: Workload = {
  name: 'read-write',
  // Backends whose provider has readWriteLock; a backend that gains it is one more entry here.
  backends: ['memory', 'redis', 'postgres', 'etcd', 'zookeeper'],
  unsafe: ['write-shares', 'token-reuse'],
  storageKeys: NAMES,
  mode: (index) => (index % 3 === 2 ? 'writer' : 'reader'),
  run: runReadWriteWorker,
  leftovers: async ({ provider }: LeftoverContext) => {
    const found: string[] = [];
    for (const name of NAMES) {
      const info = await readWriteLockOf(provider, name)
        .inspect()
        .catch((error: unknown) => ({ error: String(error) }));
      if ('error' in info || info.writer || info.readers.length > 0 || info.waiters > 0)
        found.push(`${name}: ${JSON.stringify(info, bigintJson)}`);
    }
    return found;
  },
  check: checkReadWriteHistory,
};

/** checkHistory without the rules that assume one holder at a time, plus the read-write lock's own. */
export function checkReadWriteHistory(
  events: Parameters<Workload['check']>[0],
  options: CheckOptions,
): CheckResult {
  const result = checkHistory(events, { ...options, skip: [...(options.skip ?? []), 'overlap', 'tokens'] });
  result.violations.push(...checkReadWriteOverlap(events), ...checkReadWriteTokens(events));
  return result;
}

function readWriteLockOf(provider: LockProvider, name: string): ReadWriteLock {
  if (!provider.readWriteLock) throw new Error(`${provider.backend} has no read-write lock`);
  return provider.readWriteLock(name);
}

async function runReadWriteWorker(ctx: WorkerContext): Promise<void> {
  const { config, emit, stop, random, storage } = ctx;
  const provider = await connect(config.url, config.connectOptions);
  ctx.onProvider?.(provider);
  const unsafe = config.unsafe as ReadWriteUnsafety | undefined;
  const grants: GrantRecorder = grantRecorder(config.id, emit);
  const pause = (ms: number) => sleep(ms, stop);
  const locks = new Map(
    NAMES.map((name) => {
      const real = readWriteLockOf(provider, name);
      return [name, unsafe === 'write-shares' ? writeShares(real) : real];
    }),
  );
  const tokenOf = (lock: Lock) =>
    unsafe === 'token-reuse' ? 1n + (lock.fencingToken % 3n) : lock.fencingToken;
  const worker = config.id;

  /** A writer's part: a few writes, each checking the signal just before. */
  const writeAll = async (lock: Lock, grant: string) => {
    const writes = between(random, 1, 3);
    for (let i = 0; i < writes && !stop.aborted; i++) {
      await pause(between(random, 0, config.criticalMaxMs));
      const live = !lock.signal.aborted;
      if (!live && random() > 0.5) return; // a well-behaved holder stops; half keep going
      const value = `${grant}/${i}`;
      await recordedWrite(storage, emit, { worker, key: lock.key, grant, token: tokenOf(lock), value, live });
    }
  };

  /** A reader's part: a few reads of the row, each checking the signal just before; a lost reader stops. */
  const readAll = async (lock: Lock, grant: string) => {
    const reads = between(random, 1, 3);
    for (let i = 0; i < reads && !stop.aborted; i++) {
      await pause(between(random, 0, config.criticalMaxMs));
      if (lock.signal.aborted) return;
      const t = now();
      const row = await storage.read(lock.key).catch(() => undefined); // recorded without `seen`
      emit({
        type: 'read',
        t,
        tEnd: now(),
        worker,
        key: lock.key,
        grant,
        token: String(tokenOf(lock)),
        live: true,
        ...(row ? { seen: row.token } : {}),
      });
    }
  };

  /**
   * One grant's critical section, up to the end of its holder's belief (recorded before release()
   * is called). A write may be downgraded: the read continues it and reads on after the write is
   * released (here; the caller's release() of the write after that does nothing), then goes too.
   */
  const hold = async (rw: ReadWriteLock, mode: Mode, lock: Lock, mayDowngrade: boolean) => {
    const grant = grants.granted(lock.key, mode, tokenOf(lock), lock.signal);
    if (mode === 'read') {
      await readAll(lock, grant);
      emit({ type: 'release', t: now(), worker, grant });
      return;
    }
    await writeAll(lock, grant);
    if (!mayDowngrade || stop.aborted || random() >= 0.3) {
      emit({ type: 'release', t: now(), worker, grant });
      return;
    }
    let read: Lock;
    try {
      read = await rw.acquireRead({ downgradeFrom: lock, owner: worker });
    } catch (error) {
      // A write lost meanwhile (or about to be) cannot be continued: LockLostError, and the write ends.
      emit({ type: 'acquire-error', t: now(), worker, key: lock.key, code: codeOf(error) });
      emit({ type: 'release', t: now(), worker, grant });
      return;
    }
    const readGrant = grants.granted(lock.key, 'read', tokenOf(read), read.signal, { downgradeOf: grant });
    emit({ type: 'release', t: now(), worker, grant });
    await lock.release().catch(() => undefined); // the read continues the grant
    await readAll(read, readGrant);
    emit({ type: 'release', t: now(), worker, grant: readGrant });
    await read.release().catch(() => undefined); // a lost grant's lease ends by itself
  };

  /** One request: its API, a short-lived signal now and then (a waiter cancelled), the outcome. */
  const attempt = async (name: string, mode: Mode, api: Api) => {
    const rw = locks.get(name) as ReadWriteLock;
    emit({ type: 'request', t: now(), worker, key: name, wait: api !== 'try' });
    const cancelAfter = api !== 'try' && random() < 0.25 ? between(random, 20, 500) : undefined;
    const signal =
      cancelAfter === undefined ? stop : AbortSignal.any([stop, AbortSignal.timeout(cancelAfter)]);
    const options: AcquireOptions = { owner: worker, signal, waitMs: between(random, 200, 3_000) };
    try {
      if (api === 'with') {
        const run = (lock: Lock) => hold(rw, mode, lock, false);
        await (mode === 'read' ? rw.withRead(run, options) : rw.withWrite(run, options));
        return;
      }
      const { waitMs: _, ...tryOptions } = options;
      const lock =
        api === 'try'
          ? await (mode === 'read' ? rw.tryAcquireRead(tryOptions) : rw.tryAcquireWrite(tryOptions))
          : await (mode === 'read' ? rw.acquireRead(options) : rw.acquireWrite(options));
      if (!lock) {
        emit({ type: 'acquire-error', t: now(), worker, key: name, code: 'NOT_FREE' });
        await pause(between(random, 20, 100));
        return;
      }
      await hold(rw, mode, lock, true);
      await lock.release().catch(() => undefined); // a lost grant's lease ends by itself
    } catch (error) {
      // Recorded even at stop: a request still waiting then is an answer.
      emit({
        type: 'acquire-error',
        t: now(),
        worker,
        key: name,
        code: stop.aborted ? 'STOPPED' : codeOf(error),
      });
      await pause(100);
    }
  };

  const readShare = config.mode === 'writer' ? 0.25 : 0.75;
  try {
    while (!stop.aborted) {
      const name = random() < 0.7 ? (NAMES[0] ?? '') : pick(random, NAMES);
      const mode: Mode = random() < readShare ? 'read' : 'write';
      await attempt(name, mode, pick(random, ['acquire', 'acquire', 'try', 'with'] as const));
    }
  } finally {
    await provider.close().catch(() => undefined);
  }
}

const bigintJson = (_key: string, value: unknown) => (typeof value === 'bigint' ? String(value) : value);
