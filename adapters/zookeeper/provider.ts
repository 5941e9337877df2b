import { withinGrace } from '../../src/cancel-grace.js';
import type { ConnectOptions } from '../../src/connect-options.js';
import type { ConnectionSpec } from '../../src/connection-url.js';
import { callWithin } from '../../src/deadline.js';
import { BackendUnavailableError, InvalidArgumentError, NotHolderError } from '../../src/errors.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import { KeyedFifo } from '../../src/keyed-fifo.js';
import type { OwnedLock } from '../../src/ownership.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../../src/provider-base.js';
import type { ReadWriteAdapter } from '../../src/read-write/core.js';
import { processSecrets } from '../../src/secret-mask.js';
import { GenericSemaphore } from '../../src/semaphore/core.js';
import type { Semaphore, SemaphoreOptions } from '../../src/semaphore/types.js';
import { secretsIn } from '../../src/telemetry/redact.js';
import { assertUsable, type TlsOptions, tlsOption } from '../../src/tls.js';
import type { HolderInfo, Lock, LockInfo, QueuedWaiter } from '../../src/types.js';
import { validateKey } from '../../src/validate.js';
import { lineUp, type ServerQueueEntry } from '../../src/waiter-queue.js';
import { heldNamesWalk, removeHead } from './admin.js';
import { hostsOf, ZkSession, zkCode } from './client.js';
import { type ElectionHost, ZkElection } from './election.js';
import { FolderMaker } from './folders.js';
import { clearLockDelay, delayedUntil, MARKER_NAME, readMarker } from './lock-delay.js';
import { queueOrder, removeFolderIfEmpty } from './mutex.js';
import { ZkReadWriteAdapter } from './read-write.js';
import { refusedOr } from './refusal.js';
import { ZkSemaphoreAdapter } from './semaphore.js';
import { holdTurn, takeTurn } from './turn.js';
import { unavailable } from './unavailable.js';
import { isFrameLimit, MAX_FRAME_LIMIT, MIN_FRAME_LIMIT } from './wire/frames.js';
import { type ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE } from './wire/ops.js';
import { Transaction } from './wire/transaction.js';

/** Options of `new ZooKeeperLockProvider(options)`, and the ZooKeeper options `connect()` passes on. */
export interface ZooKeeperProviderOptions extends ProviderDefaults {
  /** host:port,host:port[/chroot] */
  connectString: string;
  /** Folder that holds every lock name. Default '/fencekit/locks'; '' puts names at the root (Curator paths). */
  root?: string;
  /** Requested session timeout; the server clamps it to 2..20 × its tickTime. Default 10 000 ms. */
  sessionTimeoutMs?: number;
  /**
   * The servers' tickTime (or more), which the client cannot learn: one tick is added to the loss
   * signal's safety margin (at most half the granted session timeout). Default 2 000 ms.
   */
  serverTickMs?: number;
  /**
   * TLS towards every server (ZooKeeper's secureClientPort): the authorities to trust, a client
   * certificate and key (ssl.clientAuth=need), the server name to check when it is not the host's.
   * `true` trusts the system's authorities.
   */
  tls?: TlsOptions | boolean;
  /** Digest credentials 'user:password', added to every session. */
  digest?: string;
  /** With digest: create lock nodes with CREATOR_ALL_ACL so no other identity can delete them. */
  creatorOnlyAcl?: boolean;
  /**
   * How long a name's empty folder stays after its last release before it is deleted, so that a
   * name used again soon does not pay for re-creating it. Default 1 000 ms; close() deletes at once.
   * Folders are container nodes, which the server also removes once empty (docs/zookeeper.md); on a
   * server without them, this deletion is the only one.
   */
  folderLingerMs?: number;
  /** Largest reply accepted from a server, as the Java client's jute.maxbuffer. Default 16 MiB (about 284,000 waiters on one name). */
  maxFrameBytes?: number;
}

/** How many waiting nodes queue() reads at once. */
const QUEUE_READS_AT_ONCE = 32;

/**
 * Locks over ZooKeeper as Curator's InterProcessMutex: an EPHEMERAL_SEQUENTIAL node
 * `<root>/<name>/_c_<uuid>-lock-<seq>` per request, the lowest sequence holds, each waiter watches
 * only its predecessor; the node's czxid is the fencing token.
 */
export class ZooKeeperLockProvider extends BaseLockProvider {
  /** A semaphore `s` keeps its nodes in `s/locks` and `s/leases`: such names would reach them. */
  protected override readonly reservedNamesCollide = true;
  readonly backend = 'zookeeper' as const;
  /** A marker node per name, beside the lock nodes (lock-delay.ts). */
  protected override readonly lockDelaySupported = true;
  readonly root: string;
  readonly #options: ZooKeeperProviderOptions;
  readonly #sessionTimeoutMs: number;
  readonly #serverTickMs: number;
  readonly #acl: readonly ACL[];
  readonly #tls: TlsOptions | undefined;
  readonly #nodes = new WeakMap<Lock, { session: ZkSession; path: string }>();
  /**
   * Lock requests of one name inside this provider take turns here before one of them queues on
   * the server: the folder holds a node per process, not per waiter, so a listing (one per
   * request, as Curator's) stays short however many wait in each process.
   */
  readonly #local = new KeyedFifo();
  readonly #folderLingerMs: number;
  /** Makes the folders of every session of this provider; remembers whether the servers have containers. */
  readonly #folders = new FolderMaker();
  /** Folders to delete (if still empty) once their linger time passes, with the session to use. */
  readonly #lingering = new Map<string, { timer: NodeJS.Timeout; session: ZkSession }>();
  /** Credentials added by addDigest: every session opened later sends them too. */
  readonly #addedDigests: string[] = [];
  #session: Promise<ZkSession> | undefined;
  /** The session timeout the server granted the last session (it may clamp the one asked for). */
  #grantedTimeoutMs: number | undefined;
  /** Whether the current session's client is connected (kept by #open, read by backendReachable). */
  #connected = false;
  /** Predecessor deletions that woke a waiter of this provider (one per handoff when there is no herd). */
  wakeups = 0;

  constructor(options: ZooKeeperProviderOptions) {
    super(options);
    if (typeof options.connectString !== 'string' || options.connectString === '') {
      throw new InvalidArgumentError('connectString', 'give host:port[,host:port][/chroot]');
    }
    const root = options.root ?? '/fencekit/locks';
    if (root !== '' && !/^(\/[^/]+)+$/.test(root)) {
      throw new InvalidArgumentError(
        'root',
        `"${root}" is not an absolute ZooKeeper path without a trailing /`,
      );
    }
    if (options.creatorOnlyAcl && !options.digest) {
      throw new InvalidArgumentError('creatorOnlyAcl', 'needs digest credentials to name the creator');
    }
    const tick = options.serverTickMs ?? 2_000;
    if (typeof tick !== 'number' || !Number.isFinite(tick) || tick <= 0) {
      throw new InvalidArgumentError(
        'serverTickMs',
        `${String(tick)} is not a positive number of milliseconds`,
      );
    }
    this.#serverTickMs = tick;
    if (options.maxFrameBytes !== undefined && !isFrameLimit(options.maxFrameBytes)) {
      throw new InvalidArgumentError(
        'maxFrameBytes',
        `${String(options.maxFrameBytes)} is not a whole number of bytes from ${MIN_FRAME_LIMIT} to ${MAX_FRAME_LIMIT}`,
      );
    }
    this.root = root;
    this.#options = options;
    this.#sessionTimeoutMs = options.sessionTimeoutMs ?? 10_000;
    this.#folderLingerMs = options.folderLingerMs ?? 1_000;
    this.#acl = options.creatorOnlyAcl ? CREATOR_ALL_ACL : OPEN_ACL_UNSAFE;
    this.#tls = tlsOption(options.tls);
    if (this.#tls) assertUsable(this.#tls); // bad PEM is bad input, not an outage to retry
  }

  /**
   * A lock lives as long as its session: a dead holder's lock stays held up to the session timeout
   * (as granted), whatever ttlMs says.
   */
  protected override ttlGovernedElsewhere(ttlMs: number) {
    const boundMs = this.#grantedTimeoutMs ?? this.#sessionTimeoutMs;
    return ttlMs === boundMs ? undefined : { governedBy: 'sessionTimeoutMs', boundMs };
  }

  /** The session timeout the server granted (after clamping), once a session exists. */
  async sessionTimeoutMs(): Promise<number> {
    return (await this.#currentSession()).sessionTimeoutMs;
  }

  /**
   * Adds digest credentials 'user:password' (a rotated password), as the Java client's
   * addAuthInfo: to the live session, which sends them again on every reconnect, and to every
   * session opened later. Resolves once a server accepted them (a session is opened if there is
   * none); a server that refuses them ends the session (BackendUnavailableError, and the next call
   * opens a new session without them), and any other failure also leaves them out of later sessions.
   * Nodes created from then on carry this identity too under creatorOnlyAcl.
   */
  async addDigest(digest: string): Promise<void> {
    if (typeof digest !== 'string' || !digest.includes(':')) {
      throw new InvalidArgumentError('digest', "give credentials as 'user:password'");
    }
    this.assertOpen();
    processSecrets.add(secretsIn({ digest }));
    this.#addedDigests.push(digest); // a session opened from now on sends them in its handshake
    try {
      // Always through a live session and its answer (again, if it was just opened with them:
      // harmless), so that resolving means a server accepted them.
      const session = await this.#currentSession();
      await session.addDigest(digest, this.callTimeoutMs);
    } catch (error) {
      // Not known to be accepted: kept out of later sessions (a wrong password would end each one).
      const at = this.#addedDigests.lastIndexOf(digest);
      if (at >= 0) this.#addedDigests.splice(at, 1);
      if (zkCode(error) === 'AUTH_FAILED') {
        throw new BackendUnavailableError(
          'zookeeper: the server refused the added credentials, which ended the session',
          { cause: error },
        );
      }
      throw unavailable('adding credentials failed', error);
    }
  }

  /** The folder of a lock name: '/' in the name nests folders (ZooKeeper paths), which is safe: lock nodes are told apart by their names. */
  folder(name: string): string {
    return `${this.root}/${name}`;
  }

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key);
    this.assertOpen();
    try {
      return await this.#inspect(key);
    } catch (error) {
      throw this.#refused(error);
    }
  }

  async #inspect(key: string): Promise<LockInfo | null> {
    const session = await this.#currentSession();
    const parent = this.folder(key);
    let children: string[];
    try {
      // A server answers reads from its own copy, which may lag behind another client's write. A
      // multi (a write, even with only a check in it) goes through the leader: once it is answered,
      // this session's server has applied everything before it.
      await session.client.multi([{ op: 'check', path: '/', version: -1 }]);
      children = await session.client.getChildren(parent);
    } catch (error) {
      if (zkCode(error) === 'NO_NODE') return null;
      throw unavailable('inspect failed', error);
    }
    const order = queueOrder(children, 'lock-');
    const [head, ...queued] = order;
    // This provider's requests lined up behind its own one in the folder wait too.
    const waiters = queued.length + this.#local.behind(key);
    // Only a folder that lists a marker costs a read of it.
    if (children.includes(MARKER_NAME)) {
      const until = delayedUntil(await readMarker(session, parent), head?.name);
      // The head waits the delay out: it counts as a waiter, nobody holds.
      if (until) return { key, holder: null, waiters: waiters + (head ? 1 : 0), delayedUntil: until };
    }
    if (!head) return null;
    try {
      const { data, stat } = await session.client.getData(`${parent}/${head.name}`);
      const stored = decodeHolder(data);
      return { key, holder: { ...stored, fencingToken: stat.czxid }, waiters };
    } catch (error) {
      if (zkCode(error) === 'NO_NODE') return { key, holder: null, waiters };
      throw unavailable('inspect failed', error);
    }
  }

  /**
   * The lock nodes after the holder's (all of them while a lost grant's lock-delay runs: the head
   * waits it out), one per session and name: ours (this session's) stands for this provider's line.
   */
  protected override async queuedWaiters(key: string, limit: number): Promise<QueuedWaiter[]> {
    try {
      return await this.#queuedWaiters(key, limit);
    } catch (error) {
      throw this.#refused(error);
    }
  }

  async #queuedWaiters(key: string, limit: number): Promise<QueuedWaiter[]> {
    const signal = this.closeSignal; // close() ends the reads
    const session = await this.#currentSession(signal);
    const parent = this.folder(key);
    let children: string[];
    try {
      // Read through the leader's order, as inspect does.
      await session.client.multi([{ op: 'check', path: '/', version: -1 }], { signal });
      children = await session.client.getChildren(parent, { signal });
    } catch (error) {
      if (signal.aborted) throw signal.reason; // closed: not an outage
      if (zkCode(error) !== 'NO_NODE') throw unavailable('queue read failed', error);
      children = [];
    }
    const order = queueOrder(children, 'lock-');
    let waiting = order.slice(1);
    if (
      children.includes(MARKER_NAME) &&
      delayedUntil(await readMarker(session, parent, signal), order[0]?.name)
    ) {
      waiting = order;
    }
    const read: Array<ServerQueueEntry | undefined> = [];
    const nodes = waiting.slice(0, limit);
    // A few reads at a time: a long queue is not read with thousands of requests in flight.
    for (let start = 0; start < nodes.length; start += QUEUE_READS_AT_ONCE) {
      const batch = nodes.slice(start, start + QUEUE_READS_AT_ONCE);
      const paths = batch.map(({ name }) => `${parent}/${name}`);
      read.push(...(await Promise.all(paths.map((path) => this.#queuedNode(session, path, signal)))));
    }
    const entries = read.filter((entry) => entry !== undefined);
    return lineUp(entries, this.#local.behind(key), limit);
  }

  /** A waiting node's owner and time as stored, and whether it is this session's; undefined once gone. */
  async #queuedNode(
    session: ZkSession,
    path: string,
    signal: AbortSignal,
  ): Promise<ServerQueueEntry | undefined> {
    try {
      const { data, stat } = await session.client.getData(path, { signal });
      return { ...decodeHolder(data), ours: stat.ephemeralOwner === session.sessionId };
    } catch (error) {
      if (signal.aborted) throw signal.reason; // closed: not an outage
      if (zkCode(error) === 'NO_NODE') return undefined; // it left meanwhile
      throw unavailable('queue read failed', error);
    }
  }

  /** Deletes the holder's node (see admin.ts): its own-node watch tells it 'revoked'. */
  protected async removeGrant(key: string, expected: bigint | undefined): Promise<HolderInfo | null> {
    return removeHead(await this.#currentSession(), this.folder(key), expected).catch((error: unknown) => {
      throw this.#refused(error);
    });
  }

  /** The folders under root with a lock or read-write lock queue (names nest as folders). */
  protected async heldNames(prefix: string): Promise<string[]> {
    return heldNamesWalk(await this.#currentSession(), this.root, prefix).catch((error: unknown) => {
      throw this.#refused(error);
    });
  }

  /** The error as callers see it: AUTH_FAILED where a node's ACL refused us (refusal.ts). */
  #refused(error: unknown): unknown {
    return refusedOr(error, hostsOf(this.#options.connectString));
  }

  protected async request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      return await this.#request(req, cancel);
    } catch (error) {
      // A refusal of who we are is not an outage: the base does not retry it for waitMs.
      throw this.#refused(error);
    }
  }

  async #request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    // Campaigns queue on the server as they are (Curator's LeaderLatch sees every candidate).
    if (req.payload !== undefined) return this.#queue(req, cancel);
    // A request that must not wait (tryAcquire, waitMs 0) does not line up behind a local one.
    return this.#local.grantInTurn(req.key, req.wait, cancel, () => this.#queue(req, cancel));
  }

  /** One request's node in the name's folder: its turn, its lock-delay, its grant. */
  async #queue(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const session = await this.#currentSession(cancel);
    const parent = this.folder(req.key);
    let markerListed = false;
    const turn = await takeTurn(
      {
        session,
        parent,
        // A payload is an election proposal: campaigns queue as Curator's LeaderLatch nodes.
        kind: req.payload === undefined ? 'lock-' : 'latch-',
        data: Buffer.from(req.payload ?? encodeHolder(req.owner)),
        acl: this.#acl,
        folders: this.#folders,
        onWake: () => {
          this.wakeups += 1;
        },
        marker: {
          name: MARKER_NAME,
          seen: (present) => {
            markerListed = present;
          },
        },
      },
      req.wait,
      cancel,
      (queued) =>
        clearLockDelay(queued, {
          ...{ session, parent, acl: this.#acl, delayMs: req.lockDelayMs },
          ...{ markerListed, wait: req.wait, signal: cancel },
        }),
    );
    if (!turn) return null;
    const lock = holdTurn(session, turn, {
      key: req.key,
      ownerToken: req.ownerToken,
      released: () => this.#removeFolderLater(session, parent),
      // A server without containers keeps an emptied folder: there a lock deletes its own node at
      // close too, so that the folder can go with it.
      ...(this.#folders.containers === false ? {} : { closing: this.closeSignal }),
      ...(req.lockDelayMs > 0 ? { markerIn: parent } : {}),
    });
    this.#nodes.set(lock, { session, path: turn.queued.path });
    return lock;
  }

  /**
   * Runs a ZooKeeper multi that begins with check(lock node): it commits only while the lock is
   * held. Resolves true when it committed, false when the lock is gone.
   */
  async guardedMulti(lock: Lock, build: (tx: Transaction) => Transaction): Promise<boolean> {
    const node = this.#nodes.get(lock);
    if (!node) throw new NotHolderError(lock.key, 'this lock was not granted by this ZooKeeper provider');
    // check() with any version: the node's path is unique to this grant, so its existence is the guard.
    const tx = build(new Transaction().check(node.path));
    try {
      await node.session.client.multi(tx.ops);
      return true;
    } catch (error) {
      const code = zkCode(error);
      if (code === 'NO_NODE' || code === 'SESSION_EXPIRED') return false;
      throw unavailable('guarded multi failed', error);
    }
  }

  /** "At most `limit` at once" under `name`, as Curator's InterProcessSemaphoreV2 (see semaphore.ts). */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    const adapter = new ZkSemaphoreAdapter(name, {
      session: (cancel) => this.#currentSession(cancel),
      folder: (key) => this.folder(key),
      acl: this.#acl,
      folders: this.#folders,
      reachable: () => this.backendReachable(),
      woken: (kind) => {
        if (kind === 'release') this.semaphoreWakeups += 1;
        else this.semaphoreHandoffs += 1;
      },
      removeFolderLater: (session, parent) => this.#removeFolderLater(session, parent),
      refused: (error) => this.#refused(error),
    });
    return new GenericSemaphore(name, options, this.semaphoreContext(), adapter);
  }

  /** Readers share, a writer excludes, as Curator's InterProcessReadWriteLock on the name's folder (read-write.ts). */
  protected override readWriteAdapter(name: string): ReadWriteAdapter {
    return new ZkReadWriteAdapter(name, {
      session: (cancel) => this.#currentSession(cancel),
      folder: (key) => this.folder(key),
      acl: this.#acl,
      folders: this.#folders,
      reachable: () => this.backendReachable(),
      woken: () => {
        this.readWriteWakeups += 1;
      },
      removeFolderLater: (session, parent) => this.#removeFolderLater(session, parent),
      refused: (error) => this.#refused(error),
    });
  }

  /** Read-write lock waiters woken by the deletion of the node they watched. */
  readWriteWakeups = 0;

  /** Semaphore waiters woken by a lease change (at most one per permit), and by the mutex handed on. */
  semaphoreWakeups = 0;
  semaphoreHandoffs = 0;

  election(name: string): ZkElection {
    const host: ElectionHost = {
      callTimeoutMs: this.callTimeoutMs,
      session: () => this.#currentSession(),
      folder: (key) => this.folder(key),
      acl: this.#acl,
      campaignLock: (key, value, opts) => this.acquireWithPayload(key, value, opts),
      nodeOf: (lock) => this.#nodes.get(lock),
    };
    return new ZkElection(host, name);
  }

  /**
   * The live session, opening one when there is none or the last was lost. Concurrent callers that
   * find it lost share ONE new session (the first to notice replaces it and closes the old one).
   * With `cancel`, the caller stops waiting when it aborts; the opening goes on for the others.
   */
  async #currentSession(cancel?: AbortSignal): Promise<ZkSession> {
    const current = this.#session ?? this.#open();
    // No time limit here: the opening has its own (connectTimeoutMs) and goes on for the others.
    const session = await callWithin(current, {
      timeoutMs: Number.POSITIVE_INFINITY,
      signal: cancel,
      what: 'opening a session',
    });
    if (session.alive) return session;
    if (this.#session === current) {
      void session.close(); // a lost session is closed at once, so the server drops its nodes
      this.#open();
    }
    return this.#currentSession(cancel);
  }

  #open(): Promise<ZkSession> {
    this.#connected = false;
    const opening = ZkSession.open(
      {
        connectString: this.#options.connectString,
        sessionTimeoutMs: this.#sessionTimeoutMs,
        driftRate: this.driftRate,
        callTimeoutMs: this.callTimeoutMs,
        // A backend never reached fails within callTimeoutMs, not after a session timeout or two.
        connectTimeoutMs: this.callTimeoutMs,
        serverTickMs: this.#serverTickMs,
        onRenewal: this.reportSessionRenewal,
        ...(this.#options.digest ? { digest: this.#options.digest } : {}),
        addedDigests: [...this.#addedDigests],
        ...(this.#options.maxFrameBytes !== undefined ? { maxFrameBytes: this.#options.maxFrameBytes } : {}),
        ...(this.#tls ? { tls: this.#tls } : {}),
      },
      this.closeSignal,
    );
    this.#session = opening;
    opening.then(
      (session) => {
        this.noteReached();
        this.#connected = true;
        this.#grantedTimeoutMs = session.sessionTimeoutMs;
        session.client.onState((state) => {
          if (this.#session === opening) this.#connected = state === 'connected';
        });
      },
      () => {
        if (this.#session === opening) {
          this.#session = undefined;
          this.#connected = false;
        }
      },
    );
    return opening;
  }

  /** Empty folders go after folderLingerMs (deleting a non-empty one fails harmlessly: someone uses it). */
  #removeFolderLater(session: ZkSession, parent: string): void {
    clearTimeout(this.#lingering.get(parent)?.timer);
    const timer = setTimeout(() => {
      this.#lingering.delete(parent);
      void removeFolderIfEmpty(session, parent);
    }, this.#folderLingerMs);
    timer.unref();
    this.#lingering.set(parent, { timer, session });
  }

  protected async shutdown(): Promise<void> {
    const pending = [...this.#lingering].map(([parent, { timer, session }]) => {
      clearTimeout(timer);
      return session.alive ? removeFolderIfEmpty(session, parent) : undefined;
    });
    this.#lingering.clear();
    // Bounded by callTimeoutMs in all: half for the folders, half for closeSession's answer.
    const half = this.callTimeoutMs / 2;
    await withinGrace(Promise.all(pending), half);
    const opened = this.#session;
    const session =
      opened &&
      (await callWithin(opened, { timeoutMs: half, what: 'opening a session' }).catch(
        () => undefined, // a session not open by then (or never) has nothing to close
      ));
    await session?.close(half);
  }

  /** Reachable while the current session's connection is up: a wait that runs out otherwise is an outage. */
  protected override backendReachable(): boolean {
    return this.#connected;
  }

  /** Watch registrations the current session holds (one per path and kind), for tests and metrics. */
  async watchCount(): Promise<number> {
    return (await this.#session?.catch(() => undefined))?.client.watchCount ?? 0;
  }

  /** For tests of holder death: drops the connection without closing the session, as a killed process would. */
  async abandon(): Promise<void> {
    (await this.#session?.catch(() => undefined))?.abandon();
  }
}

/** The provider `connect()` opens for a `zk://` URL. */
export async function createProvider(
  spec: ConnectionSpec,
  options: ConnectOptions,
): Promise<ZooKeeperLockProvider> {
  // connect() resolved the URL's TLS parameters and the tls option into options.tls.
  const hosts = spec.hosts.map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`).join(',');
  return new ZooKeeperLockProvider({
    ...(options as Partial<ZooKeeperProviderOptions>),
    connectString: spec.path ? `${hosts}/${spec.path}` : hosts,
    ...(spec.username !== undefined ? { digest: `${spec.username}:${spec.password ?? ''}` } : {}),
  });
}
