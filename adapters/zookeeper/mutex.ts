import { sleepUnlessWoken } from '../../src/backoff.js';
import { CANCEL_GRACE_MS, withinGrace } from '../../src/cancel-grace.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { type ZkSession, zkCode } from './client.js';
import type { FolderMaker } from './folders.js';
import type { OwnNodeWatch } from './node-watch.js';
import { unavailable } from './unavailable.js';
import type { ZkClient } from './wire/client.js';
import { type ACL, CreateMode, type Stat } from './wire/ops.js';
import type { WatchEvent } from './wire/watches.js';

/**
 * Curator's protected names: `_c_<uuid>-lock-<seq>` for locks, `_c_<uuid>-latch-<seq>` for latches,
 * `_c_<uuid>-lease-<seq>` for semaphore leases (InterProcessSemaphoreV2), `_c_<uuid>-__READ__<seq>`
 * and `_c_<uuid>-__WRIT__<seq>` for the reads and writes of a read-write lock
 * (InterProcessReadWriteLock), which share one queue.
 */
export type NodeKind = 'lock-' | 'latch-' | 'lease-' | '__READ__' | '__WRIT__';
const NODE_NAME = /^_c_([0-9a-f-]{36})-(lock-|latch-|lease-|__READ__|__WRIT__)(-?\d+)$/;

export interface ZkQueueCall {
  session: ZkSession;
  /** The name's folder, e.g. /fencekit/locks/orders%2F42. */
  parent: string;
  kind: NodeKind;
  /** The kinds that queue with ours (default: ours alone); a read-write lock's reads and writes share one. */
  queueKinds?: readonly NodeKind[];
  /**
   * The node ours waits for, ours being at `index` of the queue, or undefined when it is our turn.
   * Default: the node just before ours (a mutex).
   */
  blockedBy?: (order: readonly ZkNode[], index: number) => ZkNode | undefined;
  data: Buffer;
  acl: readonly ACL[];
  onWake: () => void;
  /** Makes the folder (a container where the servers have them) when it is missing. */
  folders: FolderMaker;
  /** The data of the folder when it has to be created (default empty). */
  folderData?: Buffer;
  /**
   * When the node just ahead of ours was the head and is deleted, we are the head: no listing to
   * confirm it (a later node sorts after ours; see queueOrder for the sequence wrap). For the
   * semaphore's mutex, whose permits are counted safely by the lease listing without it.
   */
  headAfterPredecessor?: boolean;
  /**
   * Called as the queue is listed again after the node ahead went (most likely our turn): what it
   * sends goes out with the listing, in the same round trip. The function it returns is told the
   * listing's answer (false: not our turn after all, or the listing failed).
   */
  speculate?: () => (head: boolean) => void;
  /** Told every listing of the folder, markers and all (a read-write lock reads its grants' markers). */
  listed?: (children: readonly string[]) => void;
  /**
   * A node beside the queue that the grant must know of (the lock-delay marker, by name; lock-delay.ts
   * reads it only when known to be there): `seen` is told at every listing whether it is there. While
   * ours is next in line it is watched too, and when the head goes while it is known absent and our
   * own node known to exist (its watch answered and quiet), ours heads the queue without a listing
   * (waitForTurn).
   */
  marker?: { name: string; seen: (present: boolean) => void };
}

export interface ZkQueued {
  path: string;
  name: string;
  /** Our node's Stat as created (create2) or adopted, when known: its czxid is the fencing token. */
  stat?: Stat;
  /**
   * Our monotonic time when the create's answer came (or later, for an adopted node): its ctime,
   * the server's clock then, is a reading of that clock (lock-delay.ts, ServerClock).
   */
  answeredAt?: number;
}

export interface ZkNode {
  name: string;
  seq: number;
  kind: NodeKind;
}

/**
 * The queue order of a folder's nodes of the given kind(s): exactly Curator's (LockInternals sorts by
 * the text after the kind, compared as a string), so that fencekit and Curator always agree on the head.
 * The suffix is ZooKeeper's zero-padded signed 32-bit sequence (the folder's child-change counter):
 * after 2³¹ changes it wraps to "-…", which sorts before every older node. Neither side reorders at
 * the wrap; see docs/design.md for the limit.
 */
export function queueOrder(children: string[], kinds: NodeKind | readonly NodeKind[]): ZkNode[] {
  const wanted: readonly string[] = typeof kinds === 'string' ? [kinds] : kinds;
  const nodes: (ZkNode & { suffix: string })[] = [];
  for (const name of children) {
    const m = NODE_NAME.exec(name);
    if (m && wanted.includes(m[2] as string)) {
      nodes.push({ name, seq: Number(m[3]), kind: m[2] as NodeKind, suffix: m[3] as string });
    }
  }
  nodes.sort((a, b) => (a.suffix < b.suffix ? -1 : a.suffix > b.suffix ? 1 : 0));
  return nodes.map(({ name, seq, kind }) => ({ name, seq, kind }));
}

/** A mutex's rule: the node just before ours, none when ours is first. */
function predecessor(order: readonly ZkNode[], index: number): ZkNode | undefined {
  return order[index - 1];
}

/** Creates of one request's node: each after a lost answer that proved none was made, or a missing folder. */
const MAX_CREATES = 3;

/**
 * Creates our EPHEMERAL_SEQUENTIAL node once. The client never replays a call, and when the answer
 * is lost (connection loss, timeout) we look for our `_c_<uuid>-` node in the folder and adopt it
 * if it exists and belongs to our session, instead of creating a second one (Curator's protection).
 * Every call races `cancel`. A create whose outcome stays unknown (given up on, timed out, its
 * answer lost with no listing since) may still be applied: the session's removeMatching owns it.
 */
export async function protectedCreate(call: ZkQueueCall, cancel: AbortSignal): Promise<ZkQueued> {
  const uuid = crypto.randomUUID();
  const base = `_c_${uuid}-${call.kind}`;
  const signal = { signal: cancel };
  for (let attempt = 0; attempt < MAX_CREATES; attempt++) {
    cancel.throwIfAborted();
    try {
      // create2 answers with the Stat: the token and owner need no second read.
      const { path, stat } = await call.session.client.create2(
        `${call.parent}/${base}`,
        call.data,
        call.acl,
        CreateMode.EPHEMERAL_SEQUENTIAL,
        signal,
      );
      return { path, name: path.slice(call.parent.length + 1), stat, answeredAt: performance.now() };
    } catch (error) {
      if (cancel.aborted) {
        abandonCreate(call, uuid); // sent, perhaps: its node must not outlive us
        throw cancel.reason;
      }
      const code = zkCode(error);
      if (code === 'NO_NODE') {
        // The folder did not exist, or went as empty just now (the server's container check,
        // another client's linger deletion): make it and create again, within MAX_CREATES.
        await ensureFolder(call, cancel);
        continue;
      }
      if (code === 'CONNECTION_LOSS') {
        // ZooKeeper answers a session's calls in order: once a listing on the reconnected session
        // answers, the lost create has either made our node or never will. Adopt it, or create again.
        const adopted = await findOursAfterReconnect(call, `_c_${uuid}-`, cancel);
        if (adopted === 'unknown') abandonCreate(call, uuid);
        if (cancel.aborted) {
          if (adopted && adopted !== 'unknown') void call.session.remove(adopted.path);
          throw cancel.reason;
        }
        if (adopted === 'unknown') throw unavailable('creating the lock node failed', error);
        if (adopted) return adopted;
        continue;
      }
      // Timed out with the connection up: the create may still be applied later. Do not wait for it
      // here, but do not leave it behind either.
      abandonCreate(call, uuid);
      throw unavailable('creating the lock node failed', error);
    }
  }
  throw new BackendUnavailableError(`zookeeper: could not create a node under ${call.parent}`);
}

/**
 * After a lost answer: our node, null when it certainly does not exist, or 'unknown' when the
 * session did not come back within its timeout or cancel aborted first (it carries close too).
 */
async function findOursAfterReconnect(
  call: ZkQueueCall,
  prefix: string,
  cancel: AbortSignal,
): Promise<ZkQueued | null | 'unknown'> {
  const deadline = performance.now() + call.session.sessionTimeoutMs;
  while (call.session.alive && !cancel.aborted && performance.now() < deadline) {
    try {
      return (await findOurs(call, prefix, cancel)) ?? null;
    } catch {
      // still disconnected
      await sleepUnlessWoken(100, cancel).done.catch(() => undefined);
    }
  }
  return 'unknown';
}

/**
 * Creates the name's folder, a container (folders.ts): its ancestors open to all, the folder itself
 * with the lock nodes' ACL (deleting a node needs DELETE on its parent, so a creator-only folder
 * protects the nodes in it).
 */
async function ensureFolder(call: ZkQueueCall, cancel: AbortSignal): Promise<void> {
  const folder = { path: call.parent, data: call.folderData ?? Buffer.alloc(0), acl: call.acl };
  await call.folders.ensure(call.session.client, folder, cancel).catch((error: unknown) => {
    if (cancel.aborted) throw cancel.reason;
    throw unavailable('creating the lock folder failed', error);
  });
}

async function findOurs(
  call: ZkQueueCall,
  prefix: string,
  signal?: AbortSignal,
): Promise<ZkQueued | undefined> {
  const children = await list(call, signal);
  const name = children.find((c) => c.startsWith(prefix));
  if (!name) return undefined;
  const stat = await call.session.client.exists(`${call.parent}/${name}`, signal ? { signal } : {});
  if (!stat || stat.ephemeralOwner !== call.session.sessionId) return undefined;
  return { path: `${call.parent}/${name}`, name, stat, answeredAt: performance.now() };
}

/** A create of request `uuid` whose outcome is unknown: the session removes whatever it made. */
function abandonCreate(call: ZkQueueCall, uuid: string): void {
  void call.session.removeMatching(call.parent, `_c_${uuid}-`);
}

async function list(call: ZkQueueCall, signal?: AbortSignal): Promise<string[]> {
  try {
    return await call.session.client.getChildren(call.parent, signal ? { signal } : {});
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (zkCode(error) === 'NO_NODE') return [];
    throw unavailable('listing the queue failed', error);
  }
}

/**
 * Deletes nodes a request no longer needs, waiting for the server's confirmation at most
 * CANCEL_GRACE_MS when its caller gave up (a frozen server must not stretch waitMs or an abort),
 * else callTimeoutMs. Never rejects: the session owns the deletes from then on.
 */
export function leaveQueue(session: ZkSession, paths: readonly string[], cancel: AbortSignal): Promise<void> {
  const removing = Promise.all(paths.map((path) => session.remove(path)));
  return withinGrace(removing, cancel.aborted ? CANCEL_GRACE_MS : session.callTimeoutMs);
}

/** Deletes the folder if it is empty (NOT_EMPTY and NO_NODE are fine: someone else is using it). */
export function removeFolderIfEmpty(session: ZkSession, parent: string): Promise<void> {
  return session.client.delete(parent, -1).catch(() => undefined);
}

/**
 * Position check, as Curator's mutex: list the folder; when nothing blocks ours (by `blockedBy`:
 * for a mutex, when ours is first) it holds, after checking the node belongs to our session;
 * otherwise watch only the node that blocks ours and look again when it goes. Returns the Stat of
 * our node (its czxid is the fencing token), or null when `wait` is false and ours is blocked.
 */
export async function waitForTurn(
  call: ZkQueueCall,
  queued: ZkQueued,
  wait: boolean,
  cancel: AbortSignal,
  /** Armed as soon as we have to wait: tells a holder at once when its node is deleted. */
  watch?: OwnNodeWatch,
): Promise<Stat | null> {
  const blockedBy = call.blockedBy ?? predecessor;
  let head = false;
  let woken = false;
  for (;;) {
    cancel.throwIfAborted();
    let index = 0;
    let blocker: ZkNode | undefined;
    if (!head) {
      const told = woken ? call.speculate?.() : undefined;
      let order: ZkNode[] = [];
      try {
        const children = await list(call, cancel);
        call.listed?.(children);
        call.marker?.seen(children.includes(call.marker.name));
        order = queueOrder(children, call.queueKinds ?? call.kind);
      } finally {
        index = order.findIndex((n) => n.name === queued.name);
        told?.(index === 0);
      }
      if (index < 0) throw new BackendUnavailableError('zookeeper: our queue node is gone (session expired)');
      blocker = blockedBy(order, index);
    }
    if (!blocker) {
      const stat = queued.stat ?? (await ownStat(call, queued, cancel));
      if (stat?.ephemeralOwner !== call.session.sessionId) {
        throw new BackendUnavailableError('zookeeper: our queue node belongs to another session');
      }
      return stat;
    }
    if (!wait) return null;
    // Sent with the blocker's watch (one write): no round trip of its own. A lock granted at
    // once arms it after the grant instead (provider.ts).
    watch?.arm();
    const nextInLine = index === 1 ? watchNextInLine(call, cancel) : undefined;
    let gone = false;
    let spared = false; // the listing: its answers are known already
    try {
      gone = await deletion(call, `${call.parent}/${blocker.name}`, cancel);
    } finally {
      spared = nextInLine?.end(watch) === true;
    }
    head = gone && index === 1 && (call.headAfterPredecessor === true || spared);
    if (head && spared) call.marker?.seen(false);
    woken = gone;
  }
}

/**
 * Ours is next in line: nothing can sort ahead of it but the head (later nodes sort after ours; see
 * queueOrder for the sequence wrap), so once the head goes ours is the head. What a listing would
 * still tell is whether a lock-delay marker came, and whether our own node is still there. `end()`
 * (called once, when the wait for the head is over) says whether both are known: the marker absent
 * (watchAbsence, watched from here) and our node present (its watch answered and quiet), or the
 * grant could skip a delay or be born lost. Undefined when there is no marker to watch, or the
 * connection may leave no more watches.
 */
function watchNextInLine(
  call: ZkQueueCall,
  cancel: AbortSignal,
): { end: (own: OwnNodeWatch | undefined) => boolean } | undefined {
  if (!call.marker) return undefined;
  const path = `${call.parent}/${call.marker.name}`;
  if (!mayLeaveWatch(call.session.client, path)) return undefined;
  const marker = watchAbsence(call, path, cancel);
  return { end: (own) => marker.end() && own?.watching === true };
}

/** At most this many marker paths whose watch the server keeps for one connection (see below). */
export const MAX_LEFT_WATCHES = 1_000;
const leftWatches = new WeakMap<ZkClient, Set<string>>();

/**
 * The server keeps a watch on an absent path until the node is made or the connection ends (the
 * client forgets it when the wait ends). A connection may leave such watches on MAX_LEFT_WATCHES
 * marker paths; past that, a waiter next in line lists the queue as before. A path counts until
 * the connection ends; the next one starts afresh, the old one's watches gone with it.
 */
export function mayLeaveWatch(client: ZkClient, path: string): boolean {
  let left = leftWatches.get(client);
  if (!left) {
    const paths = new Set<string>();
    client.onState((state) => {
      if (state !== 'connecting' && state !== 'connected') paths.clear(); // the connection ended
    });
    leftWatches.set(client, paths);
    left = paths;
  }
  if (!left.has(path) && left.size >= MAX_LEFT_WATCHES) return false;
  left.add(path);
  return true;
}

/**
 * Watches that `path` is absent; `end()`, called once the wait it serves is over, says whether the
 * server answered that it was absent and nothing touched it since: no event on it, no change of
 * connection. One connection carries a session's answers and watch events in the order the server
 * applied them, and this watch is sent before the one on the node ahead, so an absence still known
 * when that node is seen deleted held at its deletion. A reconnect spoils it: the server re-fires a
 * session's watches in an order of its own (deletions before creations).
 */
function watchAbsence(call: ZkQueueCall, path: string, cancel: AbortSignal): { end: () => boolean } {
  const { client } = call.session;
  let absent = false;
  let spoiled = false;
  const spoil = () => {
    spoiled = true;
  };
  const stopStates = client.onState(spoil);
  client.exists(path, { watch: spoil, signal: cancel }).then((stat) => {
    absent = stat === null;
  }, spoil);
  return {
    end: () => {
      stopStates();
      client.unwatch(path, spoil);
      // Spoiled perhaps by a reconnect, which handed the watch on to the new connection: count it
      // there too (counting too many only costs the shortcut).
      if (spoiled) leftWatches.get(client)?.add(path);
      return absent && !spoiled;
    },
  };
}

/** Our node's Stat when its creation did not return one (nodes made by a multi). */
function ownStat(call: ZkQueueCall, queued: ZkQueued, cancel: AbortSignal): Promise<Stat | null> {
  return call.session.client.exists(queued.path, { signal: cancel }).catch((error: unknown) => {
    if (cancel.aborted) throw cancel.reason;
    throw unavailable('reading our node failed', error);
  });
}

/**
 * Resolves when path changes: true when it is gone (at once if it already is), false on another
 * event (look again); rejects on cancel or session loss. The watch listener is removed when the
 * wait ends any other way, so abandoned waits leave nothing.
 */
function deletion(call: ZkQueueCall, path: string, cancel: AbortSignal): Promise<boolean> {
  const { client } = call.session;
  return new Promise<boolean>((resolve, reject) => {
    let settled = false;
    const finish = (error?: unknown, gone = false) => {
      if (settled) return;
      settled = true;
      cancel.removeEventListener('abort', onCancel);
      unsubscribe();
      client.unwatch(path, onEvent);
      if (error === undefined) resolve(gone);
      else reject(error);
    };
    const onEvent = (event: WatchEvent) => {
      if (event.type === 'deleted') call.onWake();
      finish(undefined, event.type === 'deleted'); // deleted, or another change: look again
    };
    const onCancel = () => finish(cancel.reason);
    let unsubscribe = (): void => undefined; // whenLost may call back at once, before it returns
    unsubscribe = call.session.whenLost(() =>
      finish(new BackendUnavailableError('zookeeper: the session was lost while waiting for the lock')),
    );
    if (cancel.aborted) return onCancel();
    cancel.addEventListener('abort', onCancel, { once: true });
    client.exists(path, { watch: onEvent, signal: cancel }).then(
      (stat) => {
        if (!stat) finish(undefined, true); // already gone
      },
      (error: unknown) => finish(unavailable('watching the node ahead failed', error)),
    );
  });
}
