import { withinGrace } from '../../src/cancel-grace.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterReadWriteInfo, ReadWriteAdapter, ReadWriteRequest } from '../../src/read-write/core.js';
import type { HolderInfo } from '../../src/types.js';
import { type ZkSession, zkCode } from './client.js';
import { removeOwned } from './entries.js';
import type { FolderMaker } from './folders.js';
import { type NodeKind, queueOrder, unavailable, type ZkNode } from './mutex.js';
import { holdTurn, takeTurn } from './turn.js';
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
    const firstWrite = order.findIndex((node) => node.kind === WRITE);
    const holding =
      firstWrite === 0 ? order.slice(0, 1) : firstWrite < 0 ? order : order.slice(0, firstWrite);
    const holders = await Promise.all(holding.map((node) => this.#holder(session, node, signal)));
    const present = holders.filter((holder) => holder !== null);
    return {
      writer: firstWrite === 0 ? (present[0] ?? null) : null,
      readers: firstWrite === 0 ? [] : present,
      waiters: order.length - holding.length,
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
      },
      req.wait,
      cancel,
    );
    if (!turn) return null;
    if (cancel.aborted) {
      // Granted as the caller gave up: given back, never handed out.
      await withinGrace(removeOwned(session, turn.queued.path).catch(() => undefined));
      throw cancel.reason;
    }
    return holdTurn(session, turn, {
      key: req.name,
      ownerToken: req.ownerToken,
      released: () => this.#c.removeFolderLater(session, this.#folder),
    });
  }
}
