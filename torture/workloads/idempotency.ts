import { FencekitError, type LockProvider } from 'fencekit';
import {
  createIdempotencyStore,
  createRecordBackend,
  FinalError,
  IdempotencyStore,
  type RecordBackend,
  type RunContext,
} from 'fencekit/idempotency';
import { type CheckOptions, checkHistory } from '../checker.js';
import { now, type TortureEvent } from '../history.js';
import { between, pick } from '../random.js';
import { sleep } from '../sleep.js';
import { FencedStorage } from '../storage.js';
import { codeOf, grantRecorder, recordedWrite } from './grants.js';
import { SwitchableRecords, unfencedCompletion } from './idempotency-records.js';
import { checkIdempotency } from './idempotency-rules.js';
import type { LeftoverContext, WorkerContext, Workload } from './workload.js';

/** Idempotency keys are `idem-<n>`: a new one every KEY_EVERY_MS, the last ACTIVE_KEYS in use. */
const KEY_PREFIX = 'idem-';
const KEY_EVERY_MS = 2_000;
const ACTIVE_KEYS = 3;
/** Records outlive any run: a key's record is never legitimately gone while it is checked. */
const RETENTION_MS = 3_600_000;
/** How long a caller waits for a run in flight before it gets IdempotencyInFlightError. */
const WAIT_MS = 1_000;

/** fn's own retryable failures (not stored: the key is freed for a retry). */
class RunFailed extends Error {
  constructor(readonly code: 'TRANSIENT' | 'EFFECT_REJECTED' | 'EFFECT_ERROR' | 'STOPPED') {
    super(code);
  }
}

/**
 * Idempotent requests: callers of a few keys at once (a new key every two seconds, each in use for
 * six), every call through execute() with a lease as short as the locks' TTL. fn records its run,
 * writes THE EFFECT (the key's row in the fenced storage, with the run's token, checking its signal
 * just before; half the runs that find it aborted write anyway, as zombies) and returns its own
 * name; now and then it fails first (retryable) or ends with a FinalError (stored). Every caller's
 * outcome is recorded; after the run the runner reads each key's effect row and stored result.
 */
export const idempotencyWorkload: Workload = {
  name: 'idempotency',
  backends: ['memory', 'redis', 'postgres', 'etcd'],
  unsafe: ['unfenced-completion'],
  storageKeys: [],
  mode: () => 'caller',
  run: runIdempotencyWorker,
  leftovers: readFinalState,
  check: (events, options: CheckOptions) => {
    const result = checkHistory(events, options);
    const sorted = [...events].sort((a, b) => a.t - b.t);
    result.violations.push(...checkIdempotency(sorted));
    return result;
  },
};

function activeKeys(t: number): string[] {
  const newest = Math.floor(t / KEY_EVERY_MS);
  return Array.from({ length: ACTIVE_KEYS }, (_, i) => `${KEY_PREFIX}${newest - i}`);
}

/** The store over the URL's records, wrapped as the run needs (see idempotency-records.ts). */
async function openStore(
  url: string,
  callTimeoutMs: number,
  wrap: (records: RecordBackend) => RecordBackend,
): Promise<IdempotencyStore> {
  // The torture wraps the store's records to inject faults.
  const records = await createRecordBackend(url, { callTimeoutMs, maxConnections: 4 });
  return new IdempotencyStore(wrap(records), { callTimeoutMs });
}

async function runIdempotencyWorker(ctx: WorkerContext): Promise<void> {
  const { config, emit, stop, random, storage } = ctx;
  const leaseMs = Number(config.connectOptions.ttlMs ?? 2_000);
  const callTimeoutMs = Number(config.connectOptions.callTimeoutMs ?? 1_000);
  const switchable: SwitchableRecords[] = [];
  const store = await openStore(config.url, callTimeoutMs, (records) => {
    const used = config.unsafe === 'unfenced-completion' ? unfencedCompletion(records) : records;
    if (!config.url.startsWith('memory:')) return used;
    const link = new SwitchableRecords(used);
    switchable.push(link);
    return link;
  });
  // memory://: the pool partitions and crashes this worker through its records.
  if (switchable[0]) ctx.onProvider?.(switchable[0] as unknown as LockProvider);
  const grants = grantRecorder(config.id, emit);
  const rows = new Set<string>();
  const pause = (ms: number) => sleep(ms, stop);

  /** One run of fn: its effect is the key's row, written with the run's token. */
  const fnFor = (key: string, ran: { run?: string }) => async (run: RunContext) => {
    const grant = grants.granted(key, 'run', run.fencingToken, run.signal);
    ran.run = grant;
    if (random() < 0.1) throw new RunFailed('TRANSIENT'); // before the effect: nothing happened
    // Half the runs write their effect at once, half after some work: the nemesis freezes a run
    // just after its grant, so both a frozen run's late effect and its late completion are met.
    if (random() < 0.5) await pause(between(random, 0, 100));
    if (stop.aborted) throw new RunFailed('STOPPED'); // stopping, or crashed: a dead worker writes nothing
    const live = !run.signal.aborted;
    if (!live && random() > 0.5) throw run.signal.reason; // a well-behaved run stops; half keep going
    const token = run.fencingToken;
    const result = await recordedWrite(storage, emit, {
      worker: config.id,
      key,
      grant,
      token,
      value: grant,
      live,
    });
    if (result !== 'accepted')
      throw new RunFailed(result === 'rejected' ? 'EFFECT_REJECTED' : 'EFFECT_ERROR');
    // The rest of the run's work: a pause landing here falls between the effect and the completion.
    await pause(between(random, 0, config.criticalMaxMs));
    if (random() < 0.15) throw new FinalError(grant);
    return grant;
  };

  try {
    while (!stop.aborted) {
      const key = pick(random, activeKeys(now()));
      if (!rows.has(key)) {
        // The effect's row exists before any run of the key: the runner reads it at the end.
        const made = await storage.setup([key]).then(
          () => true,
          () => false,
        );
        if (!made) {
          await pause(100);
          continue;
        }
        rows.add(key);
      }
      emit({ type: 'request', t: now(), worker: config.id, key });
      const ran: { run?: string } = {};
      try {
        const { value, replayed } = await store.execute(key, { key }, fnFor(key, ran), {
          leaseMs,
          waitMs: WAIT_MS,
          retentionMs: RETENTION_MS,
          signal: stop,
        });
        emit({ type: 'outcome', t: now(), worker: config.id, key, ...ran, result: value, replayed });
      } catch (error) {
        emit({ type: 'outcome', t: now(), worker: config.id, key, ...ran, ...describeError(error) });
      }
      if (ran.run) emit({ type: 'release', t: now(), worker: config.id, grant: ran.run });
      await pause(between(random, 20, 200));
    }
  } finally {
    await store.close().catch(() => undefined);
  }
}

/** A FinalError is a result; anything else is an error, typed or not. */
function describeError(error: unknown): Partial<Extract<TortureEvent, { type: 'outcome' }>> {
  if (error instanceof FinalError) return { result: error.message, final: true, replayed: error.replayed };
  if (error instanceof FencekitError || error instanceof RunFailed) return { error: codeOf(error) };
  return { error: `${codeOf(error)}: ${(error as Error)?.message ?? String(error)}`, untyped: true };
}

/**
 * Runner side, after every worker stopped and every lease must have ended: per key, the effect row
 * and the result a repeat gets now (recorded as 'final' events). A key still in flight is a
 * leftover: no worker is left to hold its lease.
 */
async function readFinalState({ url, storageUrl, record }: LeftoverContext): Promise<string[]> {
  const storage = new FencedStorage(storageUrl, true);
  const store = await createIdempotencyStore(url, { callTimeoutMs: 3_000 });
  const found: string[] = [];
  try {
    for (const row of await storage.rows(KEY_PREFIX)) {
      const stored = await probe(store, row.key);
      if (stored === 'in-flight') {
        found.push(`${row.key}: still in flight after every worker stopped`);
        continue;
      }
      record({
        type: 'final',
        t: now(),
        workload: 'idempotency',
        key: row.key,
        effect: { value: row.value, token: row.token },
        stored,
      });
    }
  } finally {
    await Promise.all([store.close(), storage.close()]);
  }
  return found;
}

/** The key's stored result, by asking as a repeat would; a probe that gets to run fn finds none. */
async function probe(
  store: IdempotencyStore,
  key: string,
): Promise<{ result: string; final: boolean } | null | 'in-flight'> {
  const none = new Error('no stored result');
  try {
    const { value } = await store.execute<string>(
      key,
      { key },
      () => {
        throw none; // retryable: the key is left as it was found, free
      },
      { waitMs: 0 },
    );
    return { result: value, final: false };
  } catch (error) {
    if (error === none) return null;
    if (error instanceof FinalError) return { result: error.message, final: true };
    if (codeOf(error) === 'IDEMPOTENCY_IN_FLIGHT') return 'in-flight';
    throw error;
  }
}
