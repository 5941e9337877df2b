import { connect, type LockProvider, type Permit, type PermitOptions, type Semaphore } from 'fencekit';
import { type CheckOptions, type CheckResult, checkHistory, type RuleTally } from '../checker.js';
import { now, type TortureEvent } from '../history.js';
import { between, pick } from '../random.js';
import { sleep } from '../sleep.js';
import { codeOf, type GrantRecorder, grantRecorder, recordedWrite } from './grants.js';
import { checkPermitsOverLimit, checkPermitsReturn, checkPermitTokens } from './semaphore-rules.js';
import type { LeftoverContext, WorkerContext, Workload } from './workload.js';

/** Two names with small limits, so grants of several sizes meet at the limit often. */
const LIMITS: Record<string, number> = { 'sem-a': 2, 'sem-b': 3 };
const NAMES = Object.keys(LIMITS);

/**
 * How long the probe's request for every permit of a name may wait (see checkPermitsReturn): a
 * liveness bound, generous so that a machine busy with every workload at once is not a violation
 * (on etcd: 6.2 s seen, then 9.3 s in a CI run and 14.4 s with another process keeping a core
 * busy), while permits that never come back still are (the long-lease control's 30 s leases).
 */
const PERMITS_RETURN_BOUND_MS = 12_000;

/**
 * The control variants: 'over-grant' asks the backend for one permit fewer than it records (so
 * more than `limit` permits are believed held), 'token-reuse' hands the holder tokens that repeat,
 * 'long-lease' takes 30 s leases (a killed holder's permits stay away far past the lease the
 * checker knows), 'abandon' leaves a permit and a waiter behind and never closes its provider.
 */
type SemaphoreUnsafety = 'over-grant' | 'token-reuse' | 'long-lease' | 'abandon';

/**
 * Semaphores: acquire / tryAcquire / withPermit of 1..limit permits in a loop, through the public
 * API only; some waits are cancelled by a short-lived signal. Each holder writes to the name's
 * row of the fenced storage, checking its signal just before each write, then releases. One
 * worker in three is the probe: it asks for every permit of each name in turn, which is how the
 * checker sees a killed holder's permits come back.
 *
 * One storage row per name (not per permit slot: the library hands out no slot number, so holders
 * could not agree on one): the token rises per name across all permits, so the row is a high-water
 * mark. A zombie's write is refused once any newer permit wrote; a live holder with an older token
 * is refused too (counted among rejected writes, no violation), and the stale-write rule holds.
 */
export const semaphoreWorkload: Workload = {
  name: 'semaphore',
  // Redlock has no semaphore.
  backends: ['memory', 'redis', 'postgres', 'etcd', 'zookeeper'],
  unsafe: ['over-grant', 'token-reuse', 'long-lease', 'abandon'],
  storageKeys: NAMES,
  mode: (index) => (index % 3 === 2 ? 'probe' : 'mixed'),
  run: runSemaphoreWorker,
  leftovers: async ({ provider }: LeftoverContext) => {
    const found: string[] = [];
    for (const name of NAMES) {
      const info = await semaphoreOf(provider, name)
        .inspect()
        .catch((error: unknown) => ({ error: String(error) }));
      if ('error' in info || info.holders.length > 0 || info.waiters > 0)
        found.push(`${name}: ${JSON.stringify(info, bigintJson)}`);
    }
    return found;
  },
  check: checkSemaphoreHistory,
};

/** checkHistory without the rules that assume one holder at a time, plus the semaphore's own. */
export function checkSemaphoreHistory(events: readonly TortureEvent[], options: CheckOptions): CheckResult {
  const result = checkHistory(events, { ...options, skip: [...(options.skip ?? []), 'overlap', 'tokens'] });
  const ttlMs = options.ttlMs ?? 2_000;
  const permitsReturn: RuleTally = { judged: 0 };
  result.violations.push(
    ...checkPermitsOverLimit(events, LIMITS),
    ...checkPermitTokens(events),
    ...checkPermitsReturn(events, {
      limits: LIMITS,
      ttlMs,
      boundMs: PERMITS_RETURN_BOUND_MS,
      tally: permitsReturn,
    }),
  );
  result.judged = { 'permits-return': permitsReturn.judged };
  return result;
}

function semaphoreOf(provider: LockProvider, name: string): Semaphore {
  if (!provider.semaphore) throw new Error(`${provider.backend} has no semaphore`);
  return provider.semaphore(name, { limit: LIMITS[name] ?? 1 });
}

type Api = 'acquire' | 'tryAcquire' | 'withPermit';

async function runSemaphoreWorker(ctx: WorkerContext): Promise<void> {
  const { config, emit, stop, random, storage } = ctx;
  const provider = await connect(config.url, config.connectOptions);
  ctx.onProvider?.(provider);
  const unsafe = config.unsafe as SemaphoreUnsafety | undefined;
  const grants: GrantRecorder = grantRecorder(config.id, emit, () => ctx.stalls.connected());
  const pause = (ms: number) => sleep(ms, stop);
  const semaphores = new Map(NAMES.map((name) => [name, semaphoreOf(provider, name)]));

  /** The holder's part: writes (the signal checked just before each), then the end of its belief. */
  const hold = async (permit: Permit, permits: number) => {
    const token = unsafe === 'token-reuse' ? 1n + (permit.fencingToken % 3n) : permit.fencingToken;
    const grant = grants.granted(permit.key, 'permit', token, permit.signal, { permits });
    const writes = between(random, 1, 3);
    for (let i = 0; i < writes && !stop.aborted; i++) {
      await pause(between(random, 0, config.criticalMaxMs));
      const live = !permit.signal.aborted;
      if (!live && random() > 0.5) break; // a well-behaved holder stops; half keep going
      const value = `${grant}/${i}`;
      await recordedWrite(storage, emit, { worker: config.id, key: permit.key, grant, token, value, live });
    }
    // Recorded before release() is called: from here on the holder no longer believes it holds.
    emit({ type: 'release', t: now(), worker: config.id, grant });
  };

  /** One request: its options, a short-lived signal now and then (a waiter cancelled), the outcome. */
  const attempt = async (name: string, permits: number, api: Api, waitMs: number) => {
    const semaphore = semaphores.get(name) as Semaphore;
    emit({ type: 'request', t: now(), worker: config.id, key: name, permits, wait: api !== 'tryAcquire' });
    const cancelAfter = api !== 'tryAcquire' && random() < 0.25 ? between(random, 20, 500) : undefined;
    const signal =
      cancelAfter === undefined ? stop : AbortSignal.any([stop, AbortSignal.timeout(cancelAfter)]);
    const options: PermitOptions = {
      permits: unsafe === 'over-grant' ? Math.max(1, permits - 1) : permits,
      owner: config.id,
      signal,
      waitMs,
      ...(unsafe === 'long-lease' ? { ttlMs: 30_000 } : {}),
    };
    try {
      if (api === 'withPermit') {
        await semaphore.withPermit((permit) => hold(permit, permits), options);
        return;
      }
      const { waitMs: _, ...tryOptions } = options;
      const permit =
        api === 'tryAcquire' ? await semaphore.tryAcquire(tryOptions) : await semaphore.acquire(options);
      if (!permit) {
        emit({ type: 'acquire-error', t: now(), worker: config.id, key: name, code: 'NOT_FREE' });
        await pause(between(random, 20, 100));
        return;
      }
      await hold(permit, permits);
      await permit.release().catch(() => undefined); // a lost permit's lease ends by itself
    } catch (error) {
      // Recorded even at stop: a request still waiting then is an answer the checker uses.
      emit({
        type: 'acquire-error',
        t: now(),
        worker: config.id,
        key: name,
        code: stop.aborted ? 'STOPPED' : codeOf(error),
      });
      await pause(100);
    }
  };

  let turn = 0;
  try {
    while (!stop.aborted) {
      if (config.mode === 'probe') {
        // Every permit of each name in turn, waiting long: the name must become whole again.
        const name = NAMES[turn++ % NAMES.length] ?? '';
        await attempt(name, LIMITS[name] ?? 1, 'acquire', 15_000);
        continue;
      }
      const name = pick(random, NAMES);
      const api = pick(random, ['acquire', 'acquire', 'tryAcquire', 'withPermit'] as const);
      await attempt(name, between(random, 1, LIMITS[name] ?? 1), api, between(random, 200, 3_000));
    }
    if (unsafe === 'abandon') await abandon(semaphores);
  } finally {
    if (unsafe !== 'abandon') await provider.close().catch(() => undefined);
  }
}

/** The 'abandon' control: a permit never released, a waiter never cancelled, no close. */
async function abandon(semaphores: Map<string, Semaphore>): Promise<void> {
  const semaphore = semaphores.get(NAMES[0] ?? '') as Semaphore;
  const limit = semaphore.limit;
  await semaphore.acquire({ permits: 1, waitMs: 5_000 }).catch(() => undefined);
  semaphore.acquire({ permits: limit, waitMs: 60_000 }).catch(() => undefined); // left waiting
}

const bigintJson = (_key: string, value: unknown) => (typeof value === 'bigint' ? String(value) : value);
