import { CompareResult, CompareTarget, type Etcd3, type ICompare, type IKeyValue } from 'etcd3';
import { BackendUnavailableError } from '../../src/errors.js';
import { MAX_LOCK_DELAY_MS } from '../../src/validate.js';
import { bounded } from './bounded.js';
import { prefixEnd } from './keys.js';
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
  const delayMs = delay ? Number(delay[1]) : MAX_LOCK_DELAY_MS;
  // A running delay is on its lease, which ends it. One on no lease (written by something else, or
  // unreadable) would never end: it counts as a lost holder's, so the head stamps it onto a lease
  // (a delay of the longest kind when unreadable), never a lockout.
  if (kv.lease === '0' || kv.lease === '') return { state: 'held', revision: 0n, delayMs, kv };
  return { state: 'delay', delayMs, kv };
}

const callOptions = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

/** A Txn compare: `key` is the one made at `revision` (0n: there is no such key). */
function createdAt(key: Buffer, revision: bigint): ICompare {
  return {
    key,
    target: CompareTarget.Create,
    result: CompareResult.Equal,
    create_revision: revision.toString(),
  };
}

/**
 * Puts `marker` only while our queue key is the one we made and `also` holds. false: it is not
 * (our key is gone, or `also` failed): the caller looks again.
 */
async function putWhileQueued(
  client: Etcd3,
  queued: Queued,
  marker: { key: Buffer; value: Buffer },
  o: { also?: ICompare[]; signal: AbortSignal; timeoutMs: number },
): Promise<boolean> {
  const put = await call(
    client.kv.txn(
      {
        compare: [createdAt(queued.key, queued.revision), ...(o.also ?? [])],
        success: [{ request_put: { key: marker.key, value: marker.value } }],
        failure: [],
      },
      callOptions(o.timeoutMs),
    ),
    o.signal,
    o.timeoutMs,
    'writing the lock-delay marker',
  );
  return put.succeeded;
}

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
  await stamp(
    client,
    { key, kv: seen.kv, delayMs: seen.delayMs, value: `delay ${seen.delayMs}` },
    timeoutMs,
    signal,
  );
}

/**
 * Puts `value` on a new lease of ceil(delay) s at `key`, only while the marker is unchanged (its mod
 * revision as in `kv`) and, if given, while `grantKey` does not exist. The lease is granted after
 * the loss was seen, so its expiry (which deletes the marker) comes no sooner than the delay after
 * the loss. A lease left unused (the Txn's compare failed) expires by itself.
 */
async function stamp(
  client: Etcd3,
  o: { key: Buffer; kv: IKeyValue; delayMs: number; value: string; grantKey?: Buffer },
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  const seconds = Math.max(1, Math.ceil(o.delayMs / 1000));
  const lease = await call(
    client.leaseClient.leaseGrant({ TTL: seconds, ID: '0' }, callOptions(timeoutMs)),
    signal,
    timeoutMs,
    'lock-delay lease grant',
  );
  const unchanged = {
    key: o.key,
    target: CompareTarget.Mod,
    result: CompareResult.Equal,
    mod_revision: o.kv.mod_revision,
  };
  const grantGone = o.grantKey ? [createdAt(o.grantKey, 0n)] : [];
  await call(
    client.kv.txn(
      {
        compare: [unchanged, ...grantGone],
        success: [{ request_put: { key: o.key, value: Buffer.from(o.value), lease: lease.ID } }],
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
 * Whether the queue's head may be granted on what its enqueue Txn read, with no call and no await:
 * that Txn (in the revision that made us head) found no marker, and this grant asks for no delay.
 * A lost holder's marker is always seen: every enqueue reads it in its own Txn.
 */
export function noDelayDue(seen: { kv: IKeyValue | undefined } | undefined, delayMs: number): boolean {
  return seen !== undefined && seen.kv === undefined && delayMs === 0;
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
      const value = heldMarkerValue(queued.revision, o.delayMs);
      const also = [createdAt(key, 0n)];
      if (await putWhileQueued(client, queued, { key, value }, { also, signal: o.signal, timeoutMs }))
        return true;
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
        compare: [createdAt(lockKey, revision)],
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

/** Where a grant's lock-delay marker is, for its release. */
export interface MarkedGrant {
  client: Etcd3;
  key: Buffer;
  revision: bigint;
  marker: Buffer;
  timeoutMs: number;
}

/**
 * A grant's release: with a marker (`marked`), key and marker in one Txn, so a clean release starts
 * no delay. Without one, or unanswered, `alone` deletes the key by itself; a marker so left behind
 * turns into a delay (longer, never shorter).
 */
export async function releaseGrant(
  marked: MarkedGrant | undefined,
  alone: () => Promise<void>,
): Promise<void> {
  if (marked) {
    const { client, key, revision, marker, timeoutMs } = marked;
    const answered = await releaseWithMarker(client, key, revision, marker, timeoutMs).then(
      () => true,
      () => false,
    );
    if (answered) return;
  }
  await alone();
}

/**
 * When a delay that `marker` shows ends at the earliest, for inspect() and queue() (the head's create
 * revision given). Its lease read ends with `signal`'s reason, as the read before it.
 */
export async function delayedUntil(
  client: Etcd3,
  marker: Marker | undefined,
  headRevision: bigint | undefined,
  o: { timeoutMs: number; signal: AbortSignal | undefined },
): Promise<Date | undefined> {
  const { timeoutMs, signal } = o;
  if (!marker) return undefined;
  if (marker.state === 'held') {
    // The holder still holds: no delay. Gone: the delay starts when someone notices, so not before now + delay.
    return marker.revision === headRevision ? undefined : new Date(Date.now() + marker.delayMs);
  }
  const lease = marker.kv.lease;
  if (!lease || lease === '0') return new Date(Date.now() + marker.delayMs);
  const answer = await call(
    client.leaseClient.leaseTimeToLive({ ID: lease, keys: false }, callOptions(timeoutMs)),
    signal,
    timeoutMs,
    'reading the lock-delay lease',
  );
  const seconds = Math.max(0, Number(answer.TTL));
  return new Date(Date.now() + seconds * 1000);
}

/*
 * Lock-delay of semaphore permits and read-write grants: one marker per grant that asked for a
 * delay, `<marker folder><grant id>`, where the grant's own key is `<grant folder><grant id>` (the
 * semaphore's `leases/<id>`, the read-write queue key `read-…`/`write-…`). Its value is
 * `held <delay ms> <weight>` (weight: the grant's permits; 1 for a read-write grant, whose mode is in
 * its id), on no lease: it must outlive the holder's session. It is written with the grant (in the
 * semaphore's grant Txn; for a read-write grant, in a Txn guarded by its queue key before the grant
 * is handed out) and deleted with a clean release in one Txn (releaseWithMarker). A marker on no
 * lease whose grant key is gone is a lost grant's: a delay already, which whoever grants next stamps
 * (guarded by the marker's mod revision and by the grant key's absence) with `delay <ms> <weight>`
 * on a lease of ceil(delay) s of its own, granted after the loss was seen; etcd deletes the marker
 * when that lease expires. Until then its weight counts against the grant (permits taken; a write
 * keeps out everyone, a read keeps out writers), and a waiter watches it for that deletion.
 */

/** A grant's marker as read, when it counts as a delay (see grantDelays). */
export interface GrantDelay {
  /** The grant's id: the marker's key after the marker folder. */
  id: string;
  delayMs: number;
  /** Permits of a semaphore grant (1 for a read-write grant; 1 when unreadable). */
  weight: number;
  /** On a lease: the delay runs and ends with the lease. On none: its grant is lost, the delay not yet started. */
  started: boolean;
  kv: IKeyValue;
}

/** A grant's `held` marker value. */
export function grantMarkerValue(delayMs: number, weight: number): Buffer {
  return Buffer.from(`held ${delayMs} ${weight}`);
}

const GRANT_MARKER = /^(?:held|delay) (\d{1,5}) (\d{1,16})$/;
/** The longest lock-delay: what an unreadable marker counts as. */
const LONGEST_DELAY_MS = 60_000;

/**
 * The markers under `folder` that are delays now: those on a lease (stamped), and those whose grant
 * is not `live` (lost). A marker whose grant still holds is no delay: the grant's own key counts.
 * An unreadable marker (written by something else) is a delay of the longest kind, weight 1: once
 * stamped, its lease ends it, so it can delay and never lock out.
 */
export function grantDelays(folder: Buffer, kvs: IKeyValue[], live: (id: string) => boolean): GrantDelay[] {
  const delays: GrantDelay[] = [];
  for (const kv of kvs) {
    const id = kv.key.subarray(folder.length).toString('utf8');
    const started = kv.lease !== undefined && kv.lease !== '' && kv.lease !== '0';
    if (!started && live(id)) continue;
    const parsed = GRANT_MARKER.exec(kv.value.toString('utf8'));
    const delayMs = parsed ? Math.min(Number(parsed[1]), LONGEST_DELAY_MS) : LONGEST_DELAY_MS;
    const weight = parsed ? Number(parsed[2]) : 1;
    delays.push({ id, delayMs, weight, started, kv });
  }
  return delays;
}

/**
 * Starts the delays of lost grants among `delays` (grantKey: the key whose absence shows the loss).
 * Whoever stamps first starts it; a stamp that finds the marker changed (stamped, or deleted) does
 * nothing.
 */
export async function startGrantDelays(
  client: Etcd3,
  delays: GrantDelay[],
  grantKey: (id: string) => Buffer,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  await Promise.all(
    delays
      .filter((delay) => !delay.started)
      .map((delay) =>
        stamp(
          client,
          {
            key: delay.kv.key,
            kv: delay.kv,
            delayMs: delay.delayMs,
            value: `delay ${delay.delayMs} ${delay.weight}`,
            grantKey: grantKey(delay.id),
          },
          timeoutMs,
          signal,
        ),
      ),
  );
}

/** When each delay ends at the earliest, for inspect(): its lease's TTL, or (not started) now + delay. */
export function grantDelayEnds(
  client: Etcd3,
  delays: GrantDelay[],
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Date[]> {
  return Promise.all(
    delays.map(async (delay) => {
      if (!delay.started) return new Date(Date.now() + delay.delayMs);
      const answer = await call(
        client.leaseClient.leaseTimeToLive({ ID: delay.kv.lease, keys: false }, callOptions(timeoutMs)),
        signal,
        timeoutMs,
        'reading the lock-delay lease',
      );
      const seconds = Math.max(0, Number(answer.TTL) || 0);
      return new Date(Date.now() + seconds * 1000);
    }),
  );
}

/** Where a read-write grant's lock-delay markers are, and which of them keep it out. */
export interface GrantDelayCall {
  /** The marker folder of the name. */
  markers: Buffer;
  /** Whether a running delay keeps this grant out (a write: every one; a read: a write's). */
  blocks: (delay: GrantDelay) => boolean;
  /** This grant's lock-delay (0: none, no marker). */
  delayMs: number;
  wait: boolean;
  signal: AbortSignal;
}

/**
 * Called by a read-write grant once no key it waits for is left before its own in the queue (the
 * queue is `mutex.prefix`, a grant's id its key after it): starts the delays of lost grants it
 * finds, waits out those that keep it out (false at once when `wait` is false), then, when it asks
 * for a delay, puts its own `held` marker guarded by its queue key. Resolves true when the grant may
 * be handed out. Each round is one read Txn (the markers, the queue's keys, at one revision); a
 * queue key of ours gone means the session expired meanwhile (BackendUnavailableError).
 */
export async function clearGrantDelays(
  mutex: MutexCall,
  queued: Queued,
  o: GrantDelayCall,
): Promise<boolean> {
  const { client, callTimeoutMs: timeoutMs } = mutex;
  const queue = Buffer.from(mutex.prefix);
  const id = queued.key.subarray(queue.length).toString('utf8');
  const marker = Buffer.concat([o.markers, Buffer.from(id)]);
  for (;;) {
    const res = await call(
      client.kv.txn(
        {
          compare: [],
          success: [
            { request_range: { key: o.markers, range_end: prefixEnd(o.markers) } },
            { request_range: { key: queue, range_end: prefixEnd(queue), keys_only: true } },
          ],
          failure: [],
        },
        callOptions(timeoutMs),
      ),
      o.signal,
      timeoutMs,
      'reading the lock-delays',
    );
    const queueKeys = res.responses[1]?.response_range.kvs ?? [];
    const live = new Map(queueKeys.map((kv) => [kv.key.subarray(queue.length).toString('utf8'), kv]));
    if (live.get(id)?.create_revision !== queued.revision.toString()) {
      throw new BackendUnavailableError('etcd: the session expired while waiting; the queue entry is gone');
    }
    const delays = grantDelays(o.markers, res.responses[0]?.response_range.kvs ?? [], (other) =>
      live.has(other),
    );
    await startGrantDelays(
      client,
      delays,
      (other) => Buffer.concat([queue, Buffer.from(other)]),
      timeoutMs,
      o.signal,
    );
    const blocking = delays.find(o.blocks);
    if (blocking === undefined) {
      if (o.delayMs === 0) return true;
      // Put again as is by a replay: the marker of this very grant.
      const value = grantMarkerValue(o.delayMs, 1);
      if (await putWhileQueued(client, queued, { key: marker, value }, { signal: o.signal, timeoutMs }))
        return true;
      continue; // our key is gone: the next read says so
    }
    if (!o.wait) return false;
    const fromRevision = BigInt(res.header.revision) + 1n;
    await afterDeletion(mutex, blocking.kv.key, fromRevision, o.signal, async () => undefined);
  }
}
