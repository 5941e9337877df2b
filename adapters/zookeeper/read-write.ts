import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterReadWriteInfo, ReadWriteAdapter, ReadWriteRequest } from '../../src/read-write/core.js';
import type { HolderInfo } from '../../src/types.js';
import { type ZkSession, zkCode } from './client.js';
import type { FolderMaker } from './folders.js';
import {
  createGrantMarker,
  type GrantMarkerKind,
  grantMarkerName,
  type ListedMarker,
  listedMarkers,
  nodeUuid,
  runningDelays,
  ServerClock,
  shownDelays,
  waitForDelays,
} from './lock-delay.js';
import { leaveQueue, type NodeKind, queueOrder, type ZkNode, type ZkQueued } from './mutex.js';
import { holdTurn, takeTurn } from './turn.js';
import { unavailable } from './unavailable.js';
import type { ACL } from './wire/ops.js';

/** What a ZooKeeper read-write lock borrows from its provider. */
export interface ZkReadWriteClient {
  session(cancel?: AbortSignal): Promise<ZkSession>;
  folder(name: string): string;
  acl: readonly ACL[];
  /** Makes the lock's folder (a container where the servers have them). */
  folders: FolderMaker;
  reachable(): boolean;
  /** Counts a waiter woken by the deletion of the node it watched. */
  woken(): void;
  /** Deletes the folder if it is still empty after the provider's folderLingerMs. */
  removeFolderLater(session: ZkSession, parent: string): void;
  /** The error as the caller sees it: AUTH_FAILED where a node's ACL refused us. */
  refused(error: unknown): unknown;
}

const READ: NodeKind = '__READ__';
const WRITE: NodeKind = '__WRIT__';
/** Reads and writes queue together, in the order of their sequence suffix (Curator's sort). */
const READ_WRITE: readonly NodeKind[] = [READ, WRITE];

/**
 * A reader waits for the newest write before it: nothing else can hold it back. Curator's reader
 * watches the first write node instead; both look again when the watched node goes, so they agree
 * on every grant, and this way a release wakes only the readers it frees.
 */
function lastWriteBefore(order: readonly ZkNode[], index: number): ZkNode | undefined {
  return order.slice(0, index).findLast((node) => node.kind === WRITE);
}

/**
 * A read-write lock on ZooKeeper with Apache Curator's InterProcessReadWriteLock layout, so that
 * fencekit and Curator share one lock on one path: under the name's folder (the lock's), one
 * EPHEMERAL_SEQUENTIAL node per request, `_c_<uuid>-__READ__<seq>` or `_c_<uuid>-__WRIT__<seq>`,
 * in the order of the sequence suffix. A writer holds when its node is first and watches the node
 * just before it; a reader holds when no write node is before it and watches the last such node.
 * So a waiting writer blocks every reader behind it. The token is the node's czxid: everything
 * before a writer is gone when it is granted, so its token is greater than all of theirs. Lock
 * nodes of the same name share the folder and never meet these: each queue counts its own kinds.
 * Curator also lets a thread holding the write take a read at once (re-entrancy); fencekit's
 * downgrade does that above the adapter (ContinuedGrant), with no node of its own.
 */
export class ZkReadWriteAdapter implements ReadWriteAdapter {
  /** Lock-delay: a marker per grant that asks for one, beside the nodes (lock-delay.ts). */
  readonly keepsLockDelay = true;
  readonly #c: ZkReadWriteClient;
  readonly #folder: string;

  constructor(name: string, client: ZkReadWriteClient) {
    this.#c = client;
    this.#folder = client.folder(name);
  }

  reachable(): boolean {
    return this.#c.reachable();
  }

  async inspect(signal: AbortSignal): Promise<AdapterReadWriteInfo> {
    try {
      return await this.#inspect(signal);
    } catch (error) {
      throw this.#c.refused(error);
    }
  }

  async #inspect(signal: AbortSignal): Promise<AdapterReadWriteInfo> {
    const session = await this.#c.session(signal);
    const { client } = session;
    let children: string[];
    try {
      // Through the leader first (a multi, even of a lone check): reads then see every earlier write.
      await client.multi([{ op: 'check', path: '/', version: -1 }]);
      children = await client.getChildren(this.#folder, { signal });
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      if (zkCode(error) === 'NO_NODE') return { writer: null, readers: [], waiters: 0 };
      throw unavailable('read-write inspect failed', error);
    }
    const order = queueOrder(children, READ_WRITE);
    const lost = lostMarkers(children, order, DELAY_KINDS.write);
    const shown = lost.length > 0 ? await shownDelays(session, this.#folder, lost, signal) : [];
    const delayed = shown.map(({ marker, until }) => ({
      mode: marker.kind === 'writedelay' ? ('write' as const) : ('read' as const),
      delayedUntil: until,
    }));
    const firstWrite = order.findIndex((node) => node.kind === WRITE);
    // A lost write's delay keeps everybody waiting, a lost read's the write at the head.
    const kept = delayed.some((d) => d.mode === 'write') || (firstWrite === 0 && delayed.length > 0);
    const holding = kept
      ? []
      : firstWrite === 0
        ? order.slice(0, 1)
        : firstWrite < 0
          ? order
          : order.slice(0, firstWrite);
    const holders = await Promise.all(holding.map((node) => this.#holder(session, node, signal)));
    const present = holders.filter((holder) => holder !== null);
    return {
      writer: firstWrite === 0 ? (present[0] ?? null) : null,
      readers: firstWrite === 0 ? [] : present,
      waiters: order.length - holding.length,
      delayed,
    };
  }

  /** A holding node's record and czxid; null when it went meanwhile (released). */
  async #holder(session: ZkSession, node: ZkNode, signal: AbortSignal): Promise<HolderInfo | null> {
    try {
      const { data, stat } = await session.client.getData(`${this.#folder}/${node.name}`, { signal });
      return { ...decodeHolder(data), fencingToken: stat.czxid };
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      if (zkCode(error) === 'NO_NODE') return null;
      throw unavailable('read-write inspect failed', error);
    }
  }

  async request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      return await this.#request(req, cancel);
    } catch (error) {
      // A refusal of who we are is not an outage: the loop does not retry it for waitMs.
      throw this.#c.refused(error);
    }
  }

  async #request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const session = await this.#c.session(cancel);
    let listing: readonly string[] = [];
    let marker: string | undefined;
    const turn = await takeTurn(
      {
        session,
        parent: this.#folder,
        kind: req.mode === 'read' ? READ : WRITE,
        queueKinds: READ_WRITE,
        // A writer waits as a lock's waiter does: for the node just before its own.
        ...(req.mode === 'read' ? { blockedBy: lastWriteBefore } : {}),
        // The holder record, as our locks write it (Curator's default, the local address, is never read).
        data: Buffer.from(encodeHolder(req.owner)),
        acl: this.#c.acl,
        folders: this.#c.folders,
        onWake: () => this.#c.woken(),
        listed: (children) => {
          listing = children;
        },
      },
      req.wait,
      cancel,
      async (queued) => {
        if (!(await this.#clearDelays(session, queued, listing, req, cancel))) return false;
        if (req.lockDelayMs > 0) marker = await this.#writeMarker(session, queued, req, cancel);
        return true;
      },
    );
    if (!turn) return null;
    if (cancel.aborted) {
      // Granted as the caller gave up: given back, never handed out.
      await leaveQueue(session, [turn.queued.path], cancel);
      throw cancel.reason;
    }
    return holdTurn(session, turn, {
      key: req.name,
      ownerToken: req.ownerToken,
      released: () => this.#c.removeFolderLater(session, this.#folder),
      ...(marker ? { grantMarker: marker } : {}),
    });
  }

  /**
   * Our node's turn came (in `listing`): waits out the delays of lost grants that keep it out (a
   * write's for everybody, a read's for a write). false: `wait` is false and one runs.
   */
  async #clearDelays(
    session: ZkSession,
    queued: ZkQueued,
    listing: readonly string[],
    req: ReadWriteRequest,
    cancel: AbortSignal,
  ): Promise<boolean> {
    const lost = lostMarkers(listing, queueOrder([...listing], READ_WRITE), DELAY_KINDS[req.mode]);
    if (lost.length === 0) return true;
    const clock = new ServerClock();
    if (queued.stat) clock.note(queued.stat.ctime, queued.answeredAt);
    for (;;) {
      const running = await runningDelays({ session, parent: this.#folder, lost, clock, signal: cancel });
      if (running.length === 0) return true;
      if (!req.wait) return false;
      await waitForDelays(session, running, cancel);
    }
  }

  /** Our grant's marker (lock-delay.ts), written before the grant is handed out: its path. */
  async #writeMarker(
    session: ZkSession,
    queued: ZkQueued,
    req: ReadWriteRequest,
    cancel: AbortSignal,
  ): Promise<string> {
    const uuid = nodeUuid(queued.name) as string; // our protected name: _c_<uuid>-…
    const name = grantMarkerName(uuid, req.mode === 'read' ? 'readdelay' : 'writedelay');
    await createGrantMarker(
      session,
      { parent: this.#folder, name, node: queued.path, acl: this.#c.acl, delayMs: req.lockDelayMs },
      cancel,
    );
    return `${this.#folder}/${name}`;
  }
}

/** The markers a request of each mode waits for: a read for lost writes, a write for all. */
const DELAY_KINDS: Readonly<Record<'read' | 'write', readonly GrantMarkerKind[]>> = {
  read: ['writedelay'],
  write: ['readdelay', 'writedelay'],
};

/** Markers of lost grants in one listing: their grant's node is not in it (lock-delay.ts). */
function lostMarkers(
  children: readonly string[],
  order: readonly ZkNode[],
  kinds: readonly GrantMarkerKind[],
): ListedMarker[] {
  const alive = new Set(order.map((node) => nodeUuid(node.name)));
  return listedMarkers(children, kinds).filter((marker) => !alive.has(marker.uuid));
}
