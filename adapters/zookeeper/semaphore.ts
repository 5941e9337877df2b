import { sleepUnlessWoken } from '../../src/backoff.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterSemaphoreInfo, PermitRequest, SemaphoreAdapter } from '../../src/semaphore/core.js';
import { SemaphoreLimitMismatchError } from '../../src/semaphore/errors.js';
import type { SemaphoreHolder } from '../../src/semaphore/types.js';
import { sessionGrant } from '../../src/session-grant.js';
import { type ZkSession, zkCode } from './client.js';
import type { FolderMaker } from './folders.js';
import {
  createGrantMarker,
  grantMarkerName,
  type ListedMarker,
  listedMarkers,
  nodeUuid,
  releaseGrantWithMarker,
  runningDelays,
  ServerClock,
  shownDelays,
} from './lock-delay.js';
import {
  leaveQueue,
  protectedCreate,
  queueOrder,
  waitForTurn,
  type ZkQueueCall,
  type ZkQueued,
} from './mutex.js';
import { OwnNodeWatch } from './node-watch.js';
import { unavailable } from './unavailable.js';
import { type ACL, CreateMode } from './wire/ops.js';
import type { WatchEvent } from './wire/watches.js';

/** What a ZooKeeper semaphore borrows from its provider. */
export interface ZkSemaphoreClient {
  session(cancel?: AbortSignal): Promise<ZkSession>;
  folder(name: string): string;
  acl: readonly ACL[];
  /** Makes the semaphore's folders (containers where the servers have them). */
  folders: FolderMaker;
  reachable(): boolean;
  /** Counts a waiter woken: by a lease change (released permit) or by the mutex handed on. */
  woken(kind: 'release' | 'handoff'): void;
  /** Deletes the folder if it is still empty after the provider's folderLingerMs. */
  removeFolderLater(session: ZkSession, parent: string): void;
  /** The error as the caller sees it: AUTH_FAILED where a node's ACL refused us. */
  refused(error: unknown): unknown;
}

interface LeaseStart {
  changed: { listener: (event: WatchEvent) => void; done: Promise<void>; stop: () => void };
  stored: Promise<number | undefined | null>;
  creating: Promise<ZkQueued[]>;
  /** The semaphore's folder (its lock-delay markers), listed just before the leases. */
  markers: Promise<string[]>;
  listing: Promise<string[]>;
}

interface LeaseData {
  grant?: string;
  permits?: number;
}

/**
 * A semaphore on ZooKeeper with Apache Curator's InterProcessSemaphoreV2 layout and protocol, so
 * that fencekit and Curator share one semaphore on one path: `<path>/locks` is an
 * InterProcessMutex (`_c_<uuid>-lock-<seq>` nodes, FIFO, predecessor watch); its holder creates
 * its lease node(s) `<path>/leases/_c_<uuid>-lease-<seq>` (EPHEMERAL_SEQUENTIAL) and counts the
 * leases' children: at most `limit` → granted, else it alone watches the children until one goes;
 * then it leaves the mutex. `permits` > 1 creates that many lease nodes under one turn of the mutex
 * (all or none). The first lease node's czxid is the token. fencekit keeps the limit in the leases
 * folder's data (Curator leaves it empty) to tell a different limit apart.
 */
export class ZkSemaphoreAdapter implements SemaphoreAdapter {
  /** Lock-delay: a marker per grant that asks for one, in the semaphore's folder (lock-delay.ts). */
  readonly keepsLockDelay = true;
  readonly #c: ZkSemaphoreClient;
  readonly #folder: string;
  readonly #locks: string;
  readonly #leases: string;

  constructor(name: string, client: ZkSemaphoreClient) {
    this.#c = client;
    const folder = client.folder(name);
    this.#folder = folder;
    this.#locks = `${folder}/locks`;
    this.#leases = `${folder}/leases`;
  }

  reachable(): boolean {
    return this.#c.reachable();
  }

  async inspect(signal: AbortSignal): Promise<AdapterSemaphoreInfo> {
    try {
      return await this.#inspect(signal);
    } catch (error) {
      throw this.#c.refused(error);
    }
  }

  async #inspect(signal: AbortSignal): Promise<AdapterSemaphoreInfo> {
    const session = await this.#c.session(signal);
    const { client } = session;
    const children = async (path: string) =>
      client.getChildren(path, { signal }).catch((error: unknown) => {
        if (zkCode(error) === 'NO_NODE') return [] as string[];
        throw unavailable('semaphore inspect failed', error);
      });
    // The markers are listed before the leases: a marker whose grant's leases the later listing
    // lacks belongs to a lost grant (lock-delay.ts).
    const [folder, locks, leases, limit] = await Promise.all([
      children(this.#folder),
      children(this.#locks),
      children(this.#leases),
      this.#storedLimit(session, signal).then((l) => l ?? undefined),
    ]);
    const nodes: Array<{ id: string; data: Buffer; czxid: bigint; permits: number }> = [];
    for (const node of queueOrder(leases, 'lease-')) {
      const got = await client.getData(`${this.#leases}/${node.name}`, { signal }).catch(() => undefined);
      if (!got) continue; // released meanwhile
      const data = parse(got.data);
      // Curator's nodes carry no grant id: one permit each.
      nodes.push({
        id: data.grant ?? node.name,
        data: got.data,
        czxid: got.stat.czxid,
        permits: data.permits ?? 1,
      });
    }
    const lost = lostMarkers(folder, leases);
    const shown = lost.length > 0 ? await shownDelays(session, this.#folder, lost, signal) : [];
    const delayed = shown.map(({ marker, until }) => ({
      permits: marker.permits ?? limit ?? 1,
      delayedUntil: until,
    }));
    const kept = delayed.reduce((sum, d) => sum + d.permits, 0);
    // More leases than the limit (with the permits a delay keeps): the newest grant's nodes are the
    // mutex holder's, still waiting (only the mutex holder creates lease nodes), not a holder's.
    const newest = nodes.at(-1);
    const waiting = limit !== undefined && nodes.length + kept > limit && newest ? newest.id : undefined;
    const grants = new Map<string, SemaphoreHolder>();
    for (const node of nodes) {
      if (node.id === waiting || grants.has(node.id)) continue; // in creation order: first node first
      const stored = decodeHolder(node.data);
      grants.set(node.id, {
        owner: stored.owner,
        since: stored.since,
        fencingToken: node.czxid,
        permits: node.permits,
      });
    }
    return {
      holders: [...grants.values()].sort((a, b) => (a.fencingToken < b.fencingToken ? -1 : 1)),
      waiters: queueOrder(locks, 'lock-').length,
      delayed,
    };
  }

  async request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      return await this.#request(req, cancel);
    } catch (error) {
      // A refusal of who we are is not an outage: the loop does not retry it for waitMs.
      throw this.#c.refused(error);
    }
  }

  async #request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const session = await this.#c.session(cancel);
    const mutex: ZkQueueCall = {
      session,
      parent: this.#locks,
      kind: 'lock-',
      data: Buffer.from(encodeHolder(req.owner)),
      acl: this.#c.acl,
      folders: this.#c.folders,
      onWake: () => this.#c.woken('handoff'),
      // Safe here: the lease listing, not the mutex, keeps the permits within the limit.
      headAfterPredecessor: true,
    };
    // Woken by the node ahead going, the lease step goes out with the listing that confirms our
    // turn; when it was not our turn after all, its node is deleted at once. Safe: the lease
    // listing alone keeps the permits within the limit, the mutex only keeps waiters from
    // blocking each other (only the mutex holder keeps a lease node while it waits).
    let started: LeaseStart | undefined;
    mutex.speculate = () => {
      const step = this.#startLease(session, req, cancel);
      started = step;
      return (head) => {
        if (head) return;
        started = undefined;
        this.#abandon(session, step);
      };
    };
    const queued = await protectedCreate(mutex, cancel);
    try {
      const turn = await waitForTurn(mutex, queued, req.wait, cancel);
      if (!turn) return null;
      const step = started;
      started = undefined;
      return await this.#lease(session, req, cancel, step);
    } finally {
      if (started) this.#abandon(session, started); // waitForTurn failed after a speculative start
      // Granted or not, the mutex is left (as Curator does); the session retries a failed delete.
      // A cancelled caller waits for it only CANCEL_GRACE_MS: a frozen server must not stretch waitMs.
      await leaveQueue(session, [queued.path], cancel);
    }
  }

  /**
   * The lease step's calls, sent together in one round trip: the stored limit, our lease node(s)
   * and the listing of the leases (the server applies a session's calls in order, so the listing
   * counts our node and the limit read is the folder's).
   */
  #startLease(session: ZkSession, req: PermitRequest, cancel: AbortSignal): LeaseStart {
    const data = Buffer.from(
      JSON.stringify({ ...JSON.parse(encodeHolder(req.owner)), grant: req.ownerToken, permits: req.permits }),
    );
    const call: ZkQueueCall = {
      session,
      parent: this.#leases,
      kind: 'lease-',
      data,
      acl: this.#c.acl,
      folders: this.#c.folders,
      onWake: () => undefined,
      folderData: limitData(req.limit),
    };
    const changed = this.#nextChange(session, cancel);
    const stored = this.#storedLimit(session, cancel);
    const creating =
      req.permits === 1
        ? protectedCreate(call, cancel).then((node) => [node])
        : this.#createAtOnce(session, call, req.permits, req.limit);
    const markers = this.#listMarkers(session, cancel);
    const listing = session.client.getChildren(this.#leases, { watch: changed.listener, signal: cancel });
    for (const p of [stored, creating, markers, listing]) p.catch(() => undefined);
    return { changed, stored, creating, markers, listing };
  }

  /** A lease step started for a turn that was not ours: its node(s) go at once. */
  #abandon(session: ZkSession, step: LeaseStart): void {
    step.changed.stop();
    void step.creating.then(
      (nodes) => Promise.all(nodes.map((node) => session.remove(node.path))),
      () => undefined, // not made, or removed by the session after protectedCreate gave it up
    );
  }

  /** Holding the mutex: our lease node(s), kept once the leases number at most the limit. */
  async #lease(
    session: ZkSession,
    req: PermitRequest,
    cancel: AbortSignal,
    step = this.#startLease(session, req, cancel),
  ): Promise<OwnedLock | null> {
    const { client } = session;
    const nodes: ZkQueued[] = [];
    let granted = false;
    let { changed, listing, markers } = step;
    const { stored, creating } = step;
    const clock = new ServerClock();
    try {
      nodes.push(...(await creating));
      let limit = await stored;
      if (limit === null) limit = await this.#storedLimit(session, cancel); // the folder was made since
      if (limit !== null && limit !== undefined && limit !== req.limit) {
        throw new SemaphoreLimitMismatchError(req.name, req.limit, limit);
      }
      const first = nodes[0] as ZkQueued;
      for (;;) {
        const children = await listing.catch((error: unknown) => {
          // Sent before the folder was made again (a lingering empty one deleted just now): once more.
          if (zkCode(error) !== 'NO_NODE' || cancel.aborted) throw error;
          return client.getChildren(this.#leases, { watch: changed.listener, signal: cancel });
        });
        if (!children.includes(first.name)) {
          throw new BackendUnavailableError('zookeeper: our lease node is gone (session expired)');
        }
        const lost = lostMarkers(await markers, children);
        if (lost.length > 0 && !clock.known) {
          // Our lease node's ctime: the server's clock when its create was answered.
          const stat = first.stat ?? (await client.exists(first.path, { signal: cancel }));
          if (stat) clock.note(stat.ctime, first.answeredAt);
        }
        const running =
          lost.length > 0
            ? await runningDelays({ session, parent: this.#folder, lost, clock, signal: cancel })
            : [];
        const kept = running.reduce((sum, d) => sum + Math.min(d.marker.permits ?? req.limit, req.limit), 0);
        if (children.length + kept <= req.limit) {
          changed.stop();
          const stat = first.stat ?? (await client.exists(first.path, { signal: cancel }));
          if (stat?.ephemeralOwner !== session.sessionId) {
            throw new BackendUnavailableError('zookeeper: our lease node is gone (session expired)');
          }
          const marker =
            req.lockDelayMs > 0 ? await this.#writeMarker(session, req, first, cancel) : undefined;
          granted = true;
          const watch = new OwnNodeWatch(session, first.path);
          return this.#hold(session, req, nodes, stat.czxid, watch, marker);
        }
        if (!req.wait) {
          changed.stop();
          return null;
        }
        // Until a lease goes or the first delay ends (its permits come back).
        if (running.length > 0) {
          const until = Math.min(...running.map((d) => d.endsAt));
          const sleep = sleepUnlessWoken(Math.max(0, Math.ceil(until - performance.now())), cancel);
          sleep.done.catch(() => undefined);
          await Promise.race([changed.done, sleep.done]).finally(() => sleep.wake());
        } else {
          await changed.done;
        }
        changed.stop();
        cancel.throwIfAborted();
        changed = this.#nextChange(session, cancel);
        markers = this.#listMarkers(session, cancel);
        listing = client.getChildren(this.#leases, { watch: changed.listener, signal: cancel });
      }
    } catch (error) {
      changed.stop();
      if (cancel.aborted) throw cancel.reason;
      if (error instanceof SemaphoreLimitMismatchError) throw error;
      throw unavailable('taking a lease failed', error);
    } finally {
      if (!granted) {
        await leaveQueue(
          session,
          nodes.map((node) => node.path),
          cancel,
        );
      }
    }
  }

  /**
   * Several lease nodes in one multi: all exist or none, so nobody (inspect, a Curator client) ever
   * sees part of a grant that may not fit. One uuid marks them all: after a lost answer, the ones
   * the multi made (all or none) are found by it and removed, and the request is retried.
   */
  async #createAtOnce(
    session: ZkSession,
    call: ZkQueueCall,
    permits: number,
    limit: number,
  ): Promise<ZkQueued[]> {
    const base = `_c_${crypto.randomUUID()}-lease-`;
    const ops = Array.from({ length: permits }, () => ({
      op: 'create' as const,
      path: `${this.#leases}/${base}`,
      data: call.data,
      acl: call.acl,
      mode: CreateMode.EPHEMERAL_SEQUENTIAL,
    }));
    try {
      const results = await session.client.multi(ops).catch(async (error: unknown) => {
        if (zkCode(error) !== 'NO_NODE') throw error;
        // The leases folder went (a releaser removed it as empty just now): make it again, once.
        await this.#makeFolder(session, limit);
        return session.client.multi(ops);
      });
      const answeredAt = performance.now();
      return results.flatMap((r) =>
        r.op === 'create' ? [{ path: r.path, name: r.path.slice(this.#leases.length + 1), answeredAt }] : [],
      );
    } catch (error) {
      // The multi may have been applied with its answer lost: the session owns the clean-up and
      // retries it until the listing answers (one try could run while the connection is still down).
      void session.removeMatching(this.#leases, base);
      throw unavailable('creating the lease nodes failed', error);
    }
  }

  /**
   * The leases folder, with our limit as its data (an existing one is left as it is). Its parent
   * exists: it holds the mutex folder, where our node is.
   */
  async #makeFolder(session: ZkSession, limit: number): Promise<void> {
    const folder = { path: this.#leases, data: limitData(limit), acl: this.#c.acl };
    await this.#c.folders.create(session.client, folder, NO_CANCEL).catch((error: unknown) => {
      if (zkCode(error) !== 'NODE_EXISTS') throw unavailable('creating the leases folder failed', error);
    });
  }

  /** The semaphore's folder, where the lock-delay markers are (empty when it is gone). */
  #listMarkers(session: ZkSession, cancel: AbortSignal): Promise<string[]> {
    const listing = session.client.getChildren(this.#folder, { signal: cancel }).catch((error: unknown) => {
      if (zkCode(error) === 'NO_NODE' && !cancel.aborted) return [] as string[];
      throw error;
    });
    listing.catch(() => undefined);
    return listing;
  }

  /** Our grant's marker (lock-delay.ts), written before the grant is handed out: its path. */
  async #writeMarker(
    session: ZkSession,
    req: PermitRequest,
    first: ZkQueued,
    cancel: AbortSignal,
  ): Promise<string> {
    const name = grantMarkerName(nodeUuid(first.name) as string, 'permitdelay'); // _c_<uuid>-lease-…
    await createGrantMarker(
      session,
      {
        ...{ parent: this.#folder, name, node: first.path, acl: this.#c.acl },
        ...{ delayMs: req.lockDelayMs, permits: req.permits },
      },
      cancel,
    );
    return `${this.#folder}/${name}`;
  }

  /** The limit fencekit stored on the leases folder: undefined without one (Curator's), null without a folder. */
  async #storedLimit(session: ZkSession, signal: AbortSignal): Promise<number | undefined | null> {
    const got = await session.client.getData(this.#leases, { signal }).catch((error: unknown) => {
      if (zkCode(error) === 'NO_NODE') return null;
      throw unavailable('reading the semaphore failed', error);
    });
    if (!got) return null;
    try {
      const limit = (JSON.parse(got.data.toString('utf8')) as { fencekitLimit?: unknown }).fencekitLimit;
      return typeof limit === 'number' ? limit : undefined;
    } catch {
      return undefined; // Curator's empty folder data
    }
  }

  /** A child watch on the leases folder: `done` resolves on its event, rejects on cancel or session loss. */
  #nextChange(
    session: ZkSession,
    cancel: AbortSignal,
  ): { listener: (event: WatchEvent) => void; done: Promise<void>; stop: () => void } {
    let finish: (error?: unknown) => void = () => undefined;
    const listener = (event: WatchEvent) => {
      if (event.type !== 'sessionEnded') this.#c.woken('release');
      finish();
    };
    const done = new Promise<void>((resolve, reject) => {
      let settled = false;
      finish = (error?: unknown) => {
        if (settled) return;
        settled = true;
        cancel.removeEventListener('abort', onCancel);
        unsubscribe();
        session.client.unwatch(this.#leases, listener);
        if (error === undefined) resolve();
        else reject(error);
      };
      const onCancel = () => finish(cancel.reason);
      let unsubscribe = (): void => undefined;
      unsubscribe = session.whenLost(() =>
        finish(new BackendUnavailableError('zookeeper: the session was lost while waiting for a permit')),
      );
      cancel.addEventListener('abort', onCancel, { once: true });
    });
    done.catch(() => undefined);
    return { listener, done, stop: () => finish() };
  }

  #hold(
    session: ZkSession,
    req: PermitRequest,
    nodes: ZkQueued[],
    token: bigint,
    watch: OwnNodeWatch,
    marker: string | undefined,
  ): OwnedLock {
    const lock = sessionGrant(
      session,
      { key: req.name, fencingToken: token, ownerToken: req.ownerToken },
      async () => {
        if (!session.alive) return; // the session's end removed the nodes
        // With our marker, all in one multi; unanswered, the nodes go alone (the marker then turns
        // into a delay nobody needed: longer, never shorter). If a delete fails, the session
        // retries it until confirmed (or ends).
        const paths = nodes.map((node) => node.path);
        const both = marker
          ? await releaseGrantWithMarker(session, paths, marker).then(
              () => true,
              () => false,
            )
          : false;
        if (!both) await Promise.all(paths.map((path) => session.removeWithin(path)));
        // Not at once: while the semaphore is busy the folder (and its limit) stays.
        this.#c.removeFolderLater(session, this.#leases);
      },
    );
    lock.onEnd(session.whenLost((reason) => lock.lose(reason)));
    lock.onEnd(watch.whenDeleted(() => lock.lose('revoked'))); // deleted behind our back
    // As a lock's: sent in the next turn of the event loop unless released first; a delete before
    // it shows in its answer.
    watch.armSoon();
    return lock;
  }
}

/** #createAtOnce's calls are not cancelled once sent: their clean-up owns what they made. */
const NO_CANCEL = new AbortController().signal;

/** Markers of lost grants: listed before the leases, and none of their grant's leases is (lock-delay.ts). */
function lostMarkers(folder: readonly string[], leases: readonly string[]): ListedMarker[] {
  const alive = new Set(leases.map(nodeUuid));
  return listedMarkers(folder, ['permitdelay']).filter((marker) => !alive.has(marker.uuid));
}

function limitData(limit: number): Buffer {
  return Buffer.from(JSON.stringify({ fencekitLimit: limit }));
}

function parse(data: Buffer): LeaseData {
  try {
    const parsed = JSON.parse(data.toString('utf8')) as LeaseData;
    return typeof parsed === 'object' && parsed !== null ? parsed : {};
  } catch {
    return {};
  }
}
