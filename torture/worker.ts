import { connect, type Lock, type LockProvider, runAsLeader } from 'fencekit';
import { now, type TortureEvent } from './history.js';
import { between, pick, seeded } from './random.js';
import { sleep } from './sleep.js';
import { StallSwitch, stallingProvider } from './stall.js';
import { FencedStorage } from './storage.js';
import { type Unsafety, unsafeProvider } from './unsafe-provider.js';

export interface WorkerConfig {
  id: string;
  url: string;
  /** Passed to connect(): ttlMs, callTimeoutMs … */
  connectOptions: Record<string, unknown>;
  mode: 'lock' | 'leader';
  keys: string[];
  /** The election name leaders campaign for. */
  election: string;
  storageUrl: string;
  fencing: boolean;
  seed: number;
  /** Longest critical section, ms (random 0..max). */
  criticalMaxMs: number;
  /** Pipeline self-test only: a provider that breaks a promise on purpose. */
  unsafe?: Unsafety;
}

export type Emit = (event: TortureEvent) => void;

/**
 * One worker: acquire → critical section → fenced write → release in a loop (or lead and write
 * each term), through the public API only, recording every step. Runs until `stop` aborts.
 * A worker whose signal is already aborted still writes now and then: a zombie's write that the
 * storage must reject.
 */
export async function runWorker(
  config: WorkerConfig,
  emit: Emit,
  stop: AbortSignal,
  onProvider?: (provider: LockProvider) => void,
  stalls: StallSwitch = new StallSwitch(),
): Promise<void> {
  const random = seeded(config.seed);
  const real = await connect(config.url, config.connectOptions);
  // The last lock acquire() gave per key: a term's own lock (runAsLeader acquires through it).
  const locks = new Map<string, Lock>();
  const provider = stallingProvider(
    config.unsafe ? unsafeProvider(real, config.unsafe) : real,
    stalls,
    config.id,
    emit,
    (lock) => locks.set(lock.key, lock),
  );
  onProvider?.(real);
  const storage = new FencedStorage(config.storageUrl, config.fencing);
  let grants = 0;
  const pause = (ms: number) => sleep(ms, stop);

  /** The critical section of one grant: a few writes, each checking the signal just before. */
  const work = async (key: string, grant: string, token: bigint, signal: AbortSignal) => {
    const writes = between(random, 1, 3);
    for (let i = 0; i < writes && !stop.aborted; i++) {
      await pause(between(random, 0, config.criticalMaxMs));
      const live = !signal.aborted;
      if (!live && random() > 0.5) return; // a well-behaved holder stops; half keep going
      const t = now();
      const result = await storage.write(key, token, `${grant}/${i}`);
      emit({
        type: 'write',
        t,
        tEnd: now(),
        worker: config.id,
        key,
        grant,
        token: String(token),
        live,
        result,
      });
    }
  };

  const onGrant = (key: string, kind: 'lock' | 'term', token: bigint, signal: AbortSignal): string => {
    const grant = `${config.id}#${++grants}`;
    stalls.connected();
    emit({
      type: 'grant',
      t: now(),
      worker: config.id,
      key,
      grant,
      kind,
      token: String(token),
      abortedAtGrant: signal.aborted,
      ...(kind === 'term' ? lockState(locks.get(key), token) : {}),
    });
    signal.addEventListener('abort', () =>
      emit({ type: 'abort', t: now(), worker: config.id, grant, reason: describe(signal.reason) }),
    );
    return grant;
  };

  try {
    if (config.mode === 'leader') {
      await runAsLeader(
        provider,
        config.election,
        async ({ signal, term }) => {
          const grant = onGrant(config.election, 'term', term, signal);
          await work(config.election, grant, term, signal);
          emit({ type: 'release', t: now(), worker: config.id, grant }); // the term ends: resign follows
        },
        { signal: stop, value: config.id, backoff: { initialMs: 50, maxMs: 500 } },
      );
      return;
    }
    while (!stop.aborted) {
      // Mostly the first key: contention, so a holder that wrongly believes it holds meets another.
      const picked = random() < 0.7 ? (config.keys[0] ?? '') : pick(random, config.keys);
      // A stalled request goes to the least used key: uncontended, its grant comes in the reply
      // that the stall holds back (a waiter's grant comes later, in a call made after the stall).
      const key = stalls.armed ? (config.keys.at(-1) ?? picked) : picked;
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
      const grant = onGrant(key, 'lock', lock.fencingToken, lock.signal);
      await work(key, grant, lock.fencingToken, lock.signal);
      await lock.release().catch(() => undefined);
      emit({ type: 'release', t: now(), worker: config.id, grant });
    }
  } finally {
    await provider.close().catch(() => undefined);
    await storage.close();
  }
}

/** For a term: whether the lock it was won with had already lost its signal (unknown: not seen). */
function lockState(lock: Lock | undefined, token: bigint): { lockAborted?: boolean } {
  return lock && lock.fencingToken === token ? { lockAborted: lock.signal.aborted } : {};
}

function codeOf(error: unknown): string {
  return (error as { code?: string })?.code ?? (error as Error)?.name ?? 'unknown';
}

function describe(reason: unknown): string {
  return reason instanceof Error ? `${codeOf(reason)}: ${reason.message}` : String(reason);
}
