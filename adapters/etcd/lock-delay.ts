import { CompareResult, CompareTarget, type Etcd3, type IKeyValue } from 'etcd3';
import { bounded } from './bounded.js';
import { afterDeletion, type MutexCall, type Queued, unavailable } from './mutex.js';

/**
 * Lock-delay on etcd: one marker key per name, `<namespace>/lockdelay/<escaped name>` (a leading '/'
 * that no lock name has, so no lock's prefix covers it). While a grant that asked for a delay holds
 * the name, the marker is `held <create revision> <delay ms>`, on no lease: it must outlive the
 * holder's session. A clean release deletes key and marker in one Txn. Once the holder's key is gone
 * without that (session lost, force-release), the marker says so, and whoever finds it next (the
 * queue's head, a force-release, a tryAcquire) replaces it, guarded by its mod revision, with
 * `delay <delay ms>` on a lease of its own of ceil(delay) seconds, granted after the loss was seen:
 * etcd's clock then counts the delay from a moment after the loss, and deletes the marker at its
 * end. Nobody is granted the name while a marker that is not the head's own exists; the head
 * watches the marker's deletion. A loss nobody looks at for a long time is delayed once more, from
 * when it is found (never shorter than asked).
 */

/** A marker as stored: a holder's, or a running delay's. */
export type Marker =
  | { state: 'held'; revision: bigint; delayMs: number; kv: IKeyValue }
  | { state: 'delay'; delayMs: number; kv: IKeyValue };

export function markerKey(namespace: string, name: string): Buffer {
  return Buffer.from(`${namespace}/lockdelay/${name.replaceAll('%', '%25').replaceAll('/', '%2F')}`);
}

export function heldMarkerValue(revision: bigint, delayMs: number): Buffer {
  return Buffer.from(`held ${revision} ${delayMs}`);
}

export function parseMarker(kv: IKeyValue | undefined): Marker | undefined {
  if (!kv) return undefined;
  const text = kv.value.toString('utf8');
  const held = /^held (\d+) (\d+)$/.exec(text);
  if (held) return { state: 'held', revision: BigInt(held[1] as string), delayMs: Number(held[2]), kv };
  const delay = /^delay (\d+)$/.exec(text);
  // Unreadable: treated as a running delay of the longest kind, which its lease (if any) ends.
  return { state: 'delay', delayMs: delay ? Number(delay[1]) : 60_000, kv };
}

const callOptions = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

async function call<T>(work: Promise<T>, signal: AbortSignal | undefined, timeoutMs: number, what: string) {
  try {
    return await bounded(work, signal, timeoutMs, what);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw unavailable(`${what} failed`, error);
  }
}

/**
 * Starts the delay of a lost holder's marker (seen as `seen`): a lease of ceil(delay) s, then a Txn
 * that puts `delay <ms>` on it only while the marker is unchanged. A lease left unused (the marker
 * changed meanwhile) expires by itself.
 */
export async function startDelay(
  client: Etcd3,
  key: Buffer,
  seen: Marker,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const seconds = Math.max(1, Math.ceil(seen.delayMs / 1000));
  const lease = await call(
    client.leaseClient.leaseGrant({ TTL: seconds, ID: '0' }, callOptions(timeoutMs)),
    signal,
    timeoutMs,
    'lock-delay lease grant',
  );
  await call(
    client.kv.txn(
      {
        compare: [
          { key, target: CompareTarget.Mod, result: CompareResult.Equal, mod_revision: seen.kv.mod_revision },
        ],
        success: [{ request_put: { key, value: Buffer.from(`delay ${seen.delayMs}`), lease: lease.ID } }],
        failure: [],
      },
      callOptions(timeoutMs),
    ),
    signal,
    timeoutMs,
    'starting a lock-delay',
  );
}

/**
 * Called by the queue's head before it is granted: waits out a lost holder's lock-delay (starting
 * it when nobody has yet), then, for a grant that asks for a delay, puts its own `held` marker
 * guarded by its key. Resolves true when the head may be granted, false when `wait` is false and a
 * delay runs. `seen` is the marker as the enqueue Txn read it (no extra round trip when there is
 * none and the grant asks for none).
 */
export async function clearLockDelay(
  mutex: MutexCall & { alsoRead: Buffer },
  queued: Queued,
  o: { delayMs: number; wait: boolean; signal: AbortSignal },
  seen: { kv: IKeyValue | undefined; revision: bigint } | undefined,
): Promise<boolean> {
  const { client, callTimeoutMs: timeoutMs } = mutex;
  const key = mutex.alsoRead;
  let read = seen;
  for (;;) {
    if (read === undefined) {
      const res = await call(
        client.kv.range({ key }, callOptions(timeoutMs)),
        o.signal,
        timeoutMs,
        'reading the lock-delay',
      );
      read = { kv: res.kvs[0], revision: BigInt(res.header.revision) };
    }
    const marker = parseMarker(read.kv);
    const fromRevision = read.revision + 1n;
    read = undefined;
    if (marker?.state === 'held' && marker.revision === queued.revision) return true; // ours: a replay
    if (marker === undefined) {
      if (o.delayMs === 0) return true;
      const put = await call(
        client.kv.txn(
          {
            compare: [
              {
                key: queued.key,
                target: CompareTarget.Create,
                result: CompareResult.Equal,
                create_revision: queued.revision.toString(),
              },
              { key, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: '0' },
            ],
            success: [{ request_put: { key, value: heldMarkerValue(queued.revision, o.delayMs) } }],
            failure: [],
          },
          callOptions(timeoutMs),
        ),
        o.signal,
        timeoutMs,
        'writing the lock-delay marker',
      );
      if (put.succeeded) return true;
      continue; // our key is gone (the next read finds out) or a marker came: look again
    }
    // We head the queue, so the holder the marker names is gone without a clean release: lost.
    if (marker.state === 'held') {
      await startDelay(client, key, marker, timeoutMs, o.signal);
      continue;
    }
    if (!o.wait) return false;
    await afterDeletion(mutex, key, fromRevision, o.signal, async () => undefined);
  }
}

/** A grant's clean release: its key and its marker in one Txn. false: the key was not ours any more. */
export async function releaseWithMarker(
  client: Etcd3,
  lockKey: Buffer,
  revision: bigint,
  marker: Buffer,
  timeoutMs: number,
): Promise<boolean> {
  const res = await call(
    client.kv.txn(
      {
        compare: [
          {
            key: lockKey,
            target: CompareTarget.Create,
            result: CompareResult.Equal,
            create_revision: revision.toString(),
          },
        ],
        success: [{ request_delete_range: { key: lockKey } }, { request_delete_range: { key: marker } }],
        failure: [],
      },
      callOptions(timeoutMs),
    ),
    undefined,
    timeoutMs,
    'release',
  );
  return res.succeeded;
}

/** When a delay that `marker` shows ends at the earliest, for inspect() (the head's create revision given). */
export async function delayedUntil(
  client: Etcd3,
  marker: Marker | undefined,
  headRevision: bigint | undefined,
  timeoutMs: number,
): Promise<Date | undefined> {
  if (!marker) return undefined;
  if (marker.state === 'held') {
    // The holder still holds: no delay. Gone: the delay starts when someone notices, so not before now + delay.
    return marker.revision === headRevision ? undefined : new Date(Date.now() + marker.delayMs);
  }
  const lease = marker.kv.lease;
  if (!lease || lease === '0') return new Date(Date.now() + marker.delayMs);
  const answer = await call(
    client.leaseClient.leaseTimeToLive({ ID: lease, keys: false }, callOptions(timeoutMs)),
    undefined,
    timeoutMs,
    'reading the lock-delay lease',
  );
  const seconds = Math.max(0, Number(answer.TTL));
  return new Date(Date.now() + seconds * 1000);
}
