import { connect, type Lock as FencekitLock, type LockProvider } from 'fencekit';
import { MultiSemaphore, Mutex, Semaphore } from 'fencekit/compat/redis-semaphore';
import { Redlock } from 'fencekit/compat/redlock';
import {
  type CheckOptions,
  checkHistory,
  checkOverlaps,
  checkTokens,
  type Fault,
  type Grant,
  type Write,
} from '../checker.js';
import { now } from '../history.js';
import { between, pick } from '../random.js';
import { sleep } from '../sleep.js';
import { stallingProvider } from '../stall.js';
import { Belief } from './belief.js';
import { expiryFromCallStart, type RedlockCalls } from './expiry-from-call-start.js';
import { codeOf, type GrantRecorder, grantRecorder, recordedWrite } from './grants.js';
import { checkOverLimit, checkPermitTokens } from './over-limit.js';
import { SharedHolder } from './shared-holder.js';
import type { LeftoverContext, WorkerContext, Workload } from './workload.js';

/** Lock names; each is the Mutex's `mutex:<name>`, and the redlock facade locks that same key. */
const NAMES = ['f0', 'f1'];
const lockKey = (name: string) => `mutex:${name}`;
const LOCK_KEYS = NAMES.map(lockKey);
const SEMAPHORE = 's0';
const SEMAPHORE_KEY = `semaphore:${SEMAPHORE}`;
/** The semaphore's limit, as the app (and the checker) knows it. */
const LIMIT = 3;
/** Calls each worker runs at once on its shared Redlock, Mutex and Semaphore objects. */
const CALLS_PER_WORKER = 3;
/**
 * redlock waits retryCount × retryDelay; every lease (redlock's duration, lockTimeout) is at most
 * the runner's TTL, which the late-grant rule assumes.
 */
const REDLOCK_SETTINGS = { retryCount: 25, retryDelay: 200 };
const LOCK_TIMEOUT_MS = 2_000;
const ACQUIRE_TIMEOUT_MS = 5_000;

type Unsafe = 'expiry-from-call-start' | 'permits-over-limit';

/**
 * The compat facades driven as their users drive them: one Redlock, one Mutex per name and one
 * Semaphore and MultiSemaphore per worker, each shared by the worker's concurrent calls, through
 * redlock's `using` and `acquire` + `release` and redis-semaphore's `acquire` + `release`. The redlock
 * facade and the Mutex lock the same provider keys, so each must exclude the other. Every holder
 * writes to the fenced storage while it believes it holds: until its signal aborts (using), its
 * lock's expiration or release (acquire), or onLockLost (redis-semaphore).
 */
export const facadesWorkload: Workload = {
  name: 'facades',
  // The Semaphore facade needs provider semaphores: on Redlock its calls take the Mutex instead.
  backends: ['memory', 'redis', 'postgres', 'etcd', 'zookeeper', 'redlock'],
  unsafe: ['expiry-from-call-start', 'permits-over-limit'],
  storageKeys: [...LOCK_KEYS, SEMAPHORE_KEY],
  mode: () => 'facades',
  run: runFacadesWorker,
  leftovers: async ({ provider }: LeftoverContext) => {
    const found: string[] = [];
    for (const key of LOCK_KEYS) {
      const info = await provider.inspect(key).catch((error: unknown) => ({ error: String(error) }));
      if (info && ('error' in info || info.holder || info.waiters > 0))
        found.push(`${key}: ${JSON.stringify(info, bigintJson)}`);
    }
    if (provider.semaphore) {
      const info = await provider
        .semaphore(SEMAPHORE_KEY, { limit: LIMIT })
        .inspect()
        .catch((error: unknown) => ({ error: String(error) }));
      if ('error' in info || info.holders.length > 0 || info.waiters > 0)
        found.push(`${SEMAPHORE_KEY}: ${JSON.stringify(info, bigintJson)}`);
    }
    return found;
  },
  check: checkFacades,
};

/**
 * The lock rules of checkHistory on the lock grants (tokens rise, one live holder per key), and
 * the semaphore's on the permits (tokens unique, at most LIMIT permits believed held).
 */
export function checkFacades(events: Parameters<Workload['check']>[0], options: CheckOptions) {
  const result = checkHistory(events, { ...options, skip: [...(options.skip ?? []), 'tokens', 'overlap'] });
  const sorted = [...events].sort((a, b) => a.t - b.t);
  const grants = sorted.filter((e): e is Grant => e.type === 'grant');
  const locks = grants.filter((g) => g.kind === 'lock');
  const permits = grants.filter((g) => g.kind === 'permit');
  const writes = sorted.filter((e): e is Write => e.type === 'write');
  const faults = sorted.filter((e): e is Fault => e.type === 'fault');
  result.violations.push(
    ...checkTokens(locks),
    ...checkOverlaps(locks, writes, faults),
    ...checkPermitTokens(permits),
    ...checkOverLimit(permits, writes, faults, () => LIMIT),
  );
  return result;
}

/**
 * The objects a worker's calls share, over its provider: one Redlock, a Mutex per name, and (where
 * the provider has semaphores) a Semaphore and a MultiSemaphore of two permits on one name.
 */
function openFacades(provider: LockProvider, unsafe: Unsafe | undefined) {
  const shipped = new Redlock(provider, REDLOCK_SETTINGS);
  const redlock: RedlockCalls = unsafe === 'expiry-from-call-start' ? expiryFromCallStart(shipped) : shipped;
  const options = { lockTimeout: LOCK_TIMEOUT_MS, acquireTimeout: ACQUIRE_TIMEOUT_MS };
  const mutexes = new Map(
    NAMES.map((name) => [
      lockKey(name),
      new SharedHolder((onLockLost) => new Mutex(provider, name, { ...options, onLockLost }), 1),
    ]),
  );
  // The control builds its semaphores with one permit more than the app (and the checker) counts on.
  const limit = unsafe === 'permits-over-limit' ? LIMIT + 1 : LIMIT;
  const semaphores = provider.semaphore
    ? [
        new SharedHolder(
          (onLockLost) => new Semaphore(provider, SEMAPHORE, limit, { ...options, onLockLost }),
          1,
        ),
        new SharedHolder(
          (onLockLost) => new MultiSemaphore(provider, SEMAPHORE, limit, 2, { ...options, onLockLost }),
          2,
        ),
      ]
    : [];
  return { redlock, mutexes, semaphores };
}

/** One grant of a call, on one key: what the holder writes under. */
interface Held {
  key: string;
  grant: string;
  token: bigint;
}

async function runFacadesWorker(ctx: WorkerContext): Promise<void> {
  const { config, emit, stop, random, storage, stalls } = ctx;
  const unsafe = config.unsafe as Unsafe | undefined;
  const real = await connect(config.url, config.connectOptions);
  ctx.onProvider?.(real);
  // The last lock the provider handed this worker per key: using()'s routine gets only a signal,
  // so its token is that of the lock of its key (one holder per key: the latest is its own).
  const lastLock = new Map<string, FencekitLock>();
  const provider: LockProvider = stallingProvider(real, stalls, config.id, emit, (lock) =>
    lastLock.set(lock.key, lock),
  );
  const { redlock, mutexes, semaphores } = openFacades(provider, unsafe);
  const grants: GrantRecorder = grantRecorder(config.id, emit);
  const pause = (ms: number) => sleep(ms, stop);
  const request = (key: string) => emit({ type: 'request', t: now(), worker: config.id, key });
  const released = (held: readonly Held[]) => {
    for (const h of held) emit({ type: 'release', t: now(), worker: config.id, grant: h.grant });
  };
  const failed = async (key: string, error: unknown) => {
    if (stop.aborted) return;
    emit({ type: 'acquire-error', t: now(), worker: config.id, key, code: codeOf(error) });
    await pause(100);
  };

  /** The critical section: a few writes to each key held, each checking the belief just before. */
  const work = async (held: readonly Held[], belief: Belief, beforeWrite?: () => Promise<void>) => {
    const writes = between(random, 1, 3);
    for (let i = 0; i < writes && !stop.aborted; i++) {
      await pause(between(random, 0, config.criticalMaxMs));
      await beforeWrite?.();
      for (const h of held) {
        const live = belief.live();
        if (!live && random() > 0.5) return; // a well-behaved holder stops; half keep going
        const value = `${h.grant}/${i}`;
        await recordedWrite(storage, emit, {
          worker: config.id,
          key: h.key,
          grant: h.grant,
          token: h.token,
          value,
          live,
        });
      }
    }
  };

  /** One name most of the time (contention), sometimes both (a lock of several resources). */
  const resources = () => {
    const first = random() < 0.7 ? (NAMES[0] ?? '') : pick(random, NAMES);
    return random() < 0.15 ? [...NAMES].sort(() => random() - 0.5).map(lockKey) : [lockKey(first)];
  };
  // using() needs 100 ms over its automaticExtensionThreshold (500); acquire() may be shorter than
  // the work, so that locks expire under their holders.
  const duration = (min = 600) => between(random, min, LOCK_TIMEOUT_MS);

  /** redlock's using(): held until its signal aborts. */
  const usingCall = async () => {
    const keys = resources();
    request(keys[0] ?? '');
    let held: Held[] = [];
    try {
      await redlock.using(keys, duration(), async (signal) => {
        const belief = new Belief({ lost: [signal] });
        held = keys.map((key) => {
          const token = lastLock.get(key)?.fencingToken ?? -1n;
          return { key, token, grant: grants.granted(key, 'lock', token, belief.signal) };
        });
        await work(held, belief);
        belief.end('routine returned');
      });
    } catch (error) {
      if (held.length === 0) await failed(keys[0] ?? '', error);
    }
    released(held);
  };

  /**
   * redlock's acquire() (+ extend()) + release(): held until release, or until the lock's
   * expiration (as a monotonic time, read when the lock is handed out or extended), or while
   * `lock.expiration > Date.now()`.
   */
  const acquireCall = async () => {
    const keys = resources();
    request(keys[0] ?? '');
    let lock: Awaited<ReturnType<RedlockCalls['acquire']>>;
    try {
      lock = await redlock.acquire(keys, duration(300));
    } catch (error) {
      await failed(keys[0] ?? '', error);
      return;
    }
    const untilOf = (at: number) => now() + (at - Date.now());
    const belief = new Belief({ until: untilOf(lock.expiration), reads: () => lock.expiration > Date.now() });
    const held = keys.map((key) => {
      const token = lock.fencingTokens.get(key) ?? -1n;
      return { key, token, grant: grants.granted(key, 'lock', token, belief.signal) };
    });
    // Now and then the holder extends before a write, as redlock v5 apps did before using():
    // the extended Lock replaces the old one (whose expiration reads 0) and the belief moves.
    const extend = async () => {
      if (random() >= 0.3 || !belief.live()) return;
      try {
        lock = await lock.extend(duration(300));
        belief.moveUntil(untilOf(lock.expiration));
      } catch {
        belief.end('extend refused'); // expired or lost meanwhile: the app stops believing
      }
    };
    await work(held, belief, extend);
    belief.end('released');
    await lock.release().catch(() => undefined); // ExecutionError: it had expired or was lost
    released(held);
  };

  /** redis-semaphore's acquire() + release() on a shared object: held until release or onLockLost. */
  const holderCall = async (holder: SharedHolder, key: string) => {
    request(key);
    let turn: Awaited<ReturnType<SharedHolder['acquire']>>;
    try {
      turn = await holder.acquire(stop);
    } catch (error) {
      await failed(key, error);
      return;
    }
    if (!turn) {
      await failed(key, { code: 'TimeoutError' });
      return;
    }
    const kind = key === SEMAPHORE_KEY ? 'permit' : 'lock';
    const extra = kind === 'permit' ? { permits: holder.permits } : {};
    const held = [
      { key, token: turn.token, grant: grants.granted(key, kind, turn.token, turn.belief.signal, extra) },
    ];
    await work(held, turn.belief);
    await holder.release();
    released(held);
  };

  // The over-limit control sends every call to the semaphores: more demand than its limit.
  const semaphoreShare = unsafe === 'permits-over-limit' ? 1 : 0.3;
  const call = async () => {
    if (semaphores.length > 0 && random() < semaphoreShare) {
      return holderCall(pick(random, semaphores), SEMAPHORE_KEY);
    }
    const dice = random();
    if (dice < 0.35) return usingCall();
    if (dice < 0.7) return acquireCall();
    const key = pick(random, LOCK_KEYS);
    return holderCall(mutexes.get(key) as SharedHolder, key);
  };

  try {
    await Promise.all(
      Array.from({ length: CALLS_PER_WORKER }, async () => {
        while (!stop.aborted) await call();
      }),
    );
  } finally {
    await redlock.quit().catch(() => undefined); // closes the provider
  }
}

const bigintJson = (_key: string, value: unknown) => (typeof value === 'bigint' ? String(value) : value);
