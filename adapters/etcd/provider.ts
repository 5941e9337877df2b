import { type Etcd3, type IOperation, type IOptions, type IRequestOp, SortOrder, SortTarget } from 'etcd3';
import type { ConnectOptions } from '../../src/connect-options.js';
import type { ConnectionSpec, HostPort } from '../../src/connection-url.js';
import {
  AuthenticationError,
  BackendUnavailableError,
  InvalidArgumentError,
  NotHolderError,
} from '../../src/errors.js';
import { noteReached } from '../../src/grant-loop.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import { KeyedFifo } from '../../src/keyed-fifo.js';
import type { OwnedLock } from '../../src/ownership.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../../src/provider-base.js';
import type { ReadWriteAdapter } from '../../src/read-write/core.js';
import { GenericSemaphore } from '../../src/semaphore/core.js';
import type { Semaphore, SemaphoreOptions } from '../../src/semaphore/types.js';
import { sessionGrant } from '../../src/session-grant.js';
import { assertUsable, nodeTlsOptions, type TlsOptions, tlsOption } from '../../src/tls.js';
import type { HolderInfo, Lock, LockInfo, QueuedWaiter } from '../../src/types.js';
import { validateKey, validateTtlMs } from '../../src/validate.js';
import { lineUp } from '../../src/waiter-queue.js';
import { bounded, requestSignal } from './bounded.js';
import { endpointHosts, endWatchStream, etcdClient, urlClientOptions } from './client.js';
import { DeletionWatch } from './deletion-watch.js';
import { type ElectionHost, EtcdElection } from './election.js';
import { FolderView } from './folder-view.js';
import { loseWithSessionOrKey } from './grant-loss.js';
import { type GuardedTxnResult, guardedTxn } from './guarded-txn.js';
import { namePrefix, prefixEnd } from './keys.js';
import { heldNamesRange, heldReadWriteNames } from './list.js';
import {
  clearLockDelay,
  delayedUntil,
  markerKey,
  noDelayDue,
  parseMarker,
  releaseWithMarker,
  startDelay,
} from './lock-delay.js';
import { enqueue, type MutexCall, type Queued, sendEnqueue, unavailable, waitForTurn } from './mutex.js';
import { QueueEntry } from './queue-entry.js';
import { EtcdReadWriteAdapter, readWriteFolder } from './read-write.js';
import { refusedOr, unexplainedConnectFailure } from './refusal.js';
import { EtcdSemaphoreAdapter } from './semaphore.js';
import { EtcdSession } from './session.js';
import { EtcdSessions, leaseSeconds } from './sessions.js';
import { probeCertificates } from './tls-probe.js';

/** Options of `new EtcdLockProvider(options)`, and the etcd options `connect()` passes on. */
export interface EtcdProviderOptions extends ProviderDefaults {
  /** Endpoints, e.g. ['http://10.0.0.1:2379', 'http://10.0.0.2:2379']. */
  endpoints: string[];
  /** Prepended to every key, e.g. 'myapp/locks/'. Default '' (the layout `etcdctl lock` uses). */
  namespace?: string;
  /**
   * Session lease TTL of the locks acquired without ttlMs (neither the acquire's nor the provider's):
   * how long after this process dies they stay held. Rounded up to whole seconds (etcd leases count
   * seconds). Default 10 000 ms. A ttlMs, when given, picks a session of that TTL instead.
   */
  sessionTtlMs?: number;
  auth?: { username: string; password: string };
  /**
   * TLS towards etcd (https:// endpoints): the authorities to trust, a client certificate and key
   * (etcd's --client-cert-auth), the server name to check. `credentials`, the etcd3 client's own
   * form, is taken as it is when given.
   */
  tls?: TlsOptions | boolean;
  /** TLS for https:// endpoints, passed to the etcd3 client as `credentials`. */
  credentials?: IOptions['credentials'];
  /** Anything else for the etcd3 client (grpcOptions …). fencekit sets its own faultHandling. */
  clientOptions?: Partial<IOptions>;
}

/**
 * Locks over etcd: one session lease per TTL (see sessions.ts), the lock key's create revision as the fencing
 * token, FIFO by create revision with each waiter watching only its predecessor. Interoperates with
 * `etcdctl lock` (empty namespace, names without '/' or '%').
 */
export class EtcdLockProvider extends BaseLockProvider {
  readonly backend = 'etcd' as const;
  protected override readonly lockDelaySupported = true;
  readonly client: Etcd3;
  readonly namespace: string;
  /** host:port of each endpoint, for errors. */
  readonly #hosts: string;
  /** Asks the servers why TLS fails where gRPC does not say (tls-probe.ts); undefined without the tls option. */
  readonly #probe: (() => Promise<string | undefined>) | undefined;
  #probing: Promise<string | undefined> | undefined;
  readonly #sessionTtlMs: number;
  readonly #local = new KeyedFifo();
  /** Per name, the key of this provider's request in the name's queue, from its enqueue to its end. */
  readonly #inLine = new Map<string, Buffer>();
  readonly #keys = new WeakMap<Lock, { key: Buffer; revision: bigint; session: EtcdSession }>();
  readonly #sessions: EtcdSessions;
  /** The last session granted, once its grant resolved (for a synchronous reachability answer). */
  #granted: EtcdSession | undefined;
  #deletions: DeletionWatch | undefined;
  /** Each semaphore folder's view, shared by the provider's waiters on it (folder-view.ts). */
  readonly #folders = new Map<string, FolderView>();
  /** Predecessor deletions that woke a waiter of this provider (one per handoff when there is no herd). */
  wakeups = 0;

  constructor(options: EtcdProviderOptions) {
    super(options);
    if (!Array.isArray(options.endpoints) || options.endpoints.length === 0) {
      throw new InvalidArgumentError('endpoints', 'give at least one etcd endpoint');
    }
    this.namespace = options.namespace ?? '';
    this.#hosts = endpointHosts(options.endpoints);
    this.#sessionTtlMs = validateTtlMs(options.sessionTtlMs ?? 10_000, 'sessionTtlMs');
    if (this.#sessionTtlMs < 1000)
      throw new InvalidArgumentError('sessionTtlMs', 'etcd leases last at least 1 s');
    this.#sessions = new EtcdSessions(this.#sessionTtlMs, (ttlMs) => this.#openSession(ttlMs));
    const given = tlsOption(options.tls);
    if (given) {
      assertUsable(given); // bad PEM is bad input (the probe below would throw it untyped)
      const hosts = options.endpoints.map(endpointHost);
      const timeoutMs = Math.min(this.callTimeoutMs, PROBE_TIMEOUT_MS);
      this.#probe = () => probeCertificates(hosts, nodeTlsOptions(given), timeoutMs);
    }
    this.client = etcdClient(options);
  }

  /** Session TTL in ms as etcd grants it (whole seconds). */
  get sessionTtlMs(): number {
    return leaseSeconds(this.#sessionTtlMs) * 1000;
  }

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key, 'key', { allowReserved: true }); // reads only: reaches no semaphore's nodes
    this.assertOpen();
    const { kvs, until } = await this.#readQueue(key, 'inspect failed');
    const [head, ...waiters] = kvs;
    // This provider's requests that wait in process behind its own key count too, as elsewhere.
    const behind = this.#local.behind(key);
    if (until) return { key, holder: null, waiters: kvs.length + behind, delayedUntil: until }; // the head waits too
    if (!head) return behind > 0 ? { key, holder: null, waiters: behind } : null;
    const stored = decodeHolder(head.value);
    return {
      key,
      holder: { owner: stored.owner, since: stored.since, fencingToken: BigInt(head.create_revision) },
      waiters: waiters.length + behind,
    };
  }

  /**
   * The keys after the owner's (all of them while a lost grant's lock-delay runs: the head waits
   * it out), one per session and name: ours stands for this provider's line of the name.
   */
  protected override async queuedWaiters(name: string, limit: number): Promise<QueuedWaiter[]> {
    const { kvs, until } = await this.#readQueue(name, 'queue read failed', this.closeSignal);
    const waiting = until ? kvs : kvs.slice(1);
    const ours = this.#inLine.get(name);
    const entries = waiting.slice(0, limit).map(({ key, value }) => ({
      ...decodeHolder(value),
      ours: ours !== undefined && key.equals(ours),
    }));
    return lineUp(entries, this.#local.behind(name), limit);
  }

  /**
   * A name's keys in create order and, when a lost grant's lock-delay runs, its end: one Txn, given
   * up when `signal` aborts.
   */
  async #readQueue(
    key: string,
    failed: string,
    signal?: AbortSignal,
  ): Promise<{
    kvs: Array<{ key: Buffer; value: Buffer; create_revision: string }>;
    until: Date | undefined;
  }> {
    const prefix = Buffer.from(namePrefix(this.namespace, key));
    try {
      // The queue and the lock-delay marker in one read.
      const read = this.client.kv.txn(
        {
          compare: [],
          success: [
            {
              request_range: {
                key: prefix,
                range_end: prefixEnd(prefix),
                sort_order: SortOrder.Ascend,
                sort_target: SortTarget.Create,
              },
            },
            { request_range: { key: markerKey(this.namespace, key) } },
          ],
          failure: [],
        },
        { deadline: new Date(Date.now() + this.callTimeoutMs) },
      );
      const res = await bounded(read, signal, this.callTimeoutMs, failed);
      const kvs = res.responses[0]?.response_range.kvs ?? [];
      const marker = parseMarker(res.responses[1]?.response_range.kvs[0]);
      const headRevision = kvs[0] === undefined ? undefined : BigInt(kvs[0].create_revision);
      const until = await delayedUntil(this.client, marker, headRevision, {
        timeoutMs: this.callTimeoutMs,
        signal,
      });
      return { kvs, until };
    } catch (error) {
      if (signal?.aborted) throw signal.reason; // closed: not an outage
      throw await this.#refused(unavailable(failed, error));
    }
  }

  /**
   * Deletes the owner's key (the lowest create revision under the name) only while it still has
   * that create revision (or `expected`): a key made after the read is never deleted. The holder's
   * deletion watch aborts its signal with 'revoked'; the next key in line owns the name.
   */
  protected async removeGrant(key: string, expected: bigint | undefined): Promise<HolderInfo | null> {
    const prefix = Buffer.from(namePrefix(this.namespace, key));
    const deadline = () => ({ deadline: new Date(Date.now() + this.callTimeoutMs) });
    try {
      const { kvs } = await this.client.kv.range(
        {
          key: prefix,
          range_end: prefixEnd(prefix),
          sort_order: SortOrder.Ascend,
          sort_target: SortTarget.Create,
          limit: 1,
        },
        deadline(),
      );
      const [head] = kvs;
      if (!head) return null;
      const revision = expected ?? BigInt(head.create_revision);
      const marker = markerKey(this.namespace, key);
      const { succeeded, responses } = await this.client
        .if(head.key, 'Create', '==', revision.toString())
        .then(this.client.delete().key(head.key), this.client.get(marker))
        .options(deadline())
        .commit();
      if (!succeeded) return null;
      // The holder's lock-delay starts now (else the next head would start it).
      const held = parseMarker(responses[1]?.response_range.kvs[0]);
      if (held?.state === 'held' && held.revision === revision) {
        await startDelay(this.client, marker, held, this.callTimeoutMs);
      }
      const stored = decodeHolder(head.value);
      return { owner: stored.owner, since: stored.since, fencingToken: revision };
    } catch (error) {
      throw await this.#refused(unavailable('force-release failed', error));
    }
  }

  /** The names with a key under the namespace (the first key of a name holds it), locks and read-write locks. */
  protected async heldNames(prefix: string): Promise<string[]> {
    try {
      const [locks, readWrite] = await Promise.all([
        heldNamesRange(this.client, this.namespace, prefix, this.callTimeoutMs),
        heldReadWriteNames(this.client, readWriteFolder(this.namespace), prefix, this.callTimeoutMs),
      ]);
      return [...locks, ...readWrite];
    } catch (error) {
      throw await this.#refused(unavailable('list failed', error));
    }
  }

  protected async request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      return await this.#request(req, cancel);
    } catch (error) {
      // A refusal of who we are is not an outage: the base does not retry it for waitMs.
      throw await this.#refused(error);
    }
  }

  /**
   * The error as callers see it: an AuthenticationError when etcd refused who we are, told by the
   * error itself or, where gRPC gives no reason, by one probe of the servers shared by the calls
   * failing meanwhile.
   */
  async #refused(error: unknown): Promise<unknown> {
    const mapped = refusedOr(error, this.#hosts);
    if (mapped instanceof AuthenticationError || !this.#probe || !unexplainedConnectFailure(error))
      return mapped;
    this.#probing ??= this.#probe().finally(() => {
      setTimeout(() => {
        this.#probing = undefined;
      }, PROBE_REUSE_MS).unref();
    });
    const why = await this.#probing;
    return why === undefined ? mapped : new AuthenticationError('etcd', this.#hosts, why, { cause: error });
  }

  async #request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    // One etcd key per session and name: acquires of one name in this provider take turns here. A
    // turn ends only once etcd confirmed our key's deletion, or the session (its lease) ended.
    // A request that must not wait (tryAcquire, waitMs 0) does not queue behind a local holder.
    // A free name and a granted session are taken at once: no timer, no await.
    const leave =
      this.#local.tryEnter(req.key) ?? (req.wait ? await this.#local.enter(req.key, cancel) : null);
    if (!leave) return null;
    let session: EtcdSession;
    try {
      cancel.throwIfAborted(); // closed meanwhile: send nothing
      session = this.#sessions.live(this.#sessionTtl(req)) ?? (await this.#grantedSession(req, cancel));
      this.noteReached();
    } catch (error) {
      leave();
      throw error;
    }
    const { signal, dispose } = requestSignal(cancel, (onLost) => session.whenLost(onLost));
    try {
      return await this.#acquire(req, session, signal, leave);
    } finally {
      dispose();
    }
  }

  /** The session TTL an acquire asks for: its ttlMs when given, else the provider's sessionTtlMs. */
  #sessionTtl(req: LockRequest): number | undefined {
    return req.ttlGiven ? req.ttlMs : undefined;
  }

  /** The request's session when it must be granted (or replaced) first: bounded and cancellable. */
  #grantedSession(req: LockRequest, cancel: AbortSignal): Promise<EtcdSession> {
    const current = this.#sessions.current(this.#sessionTtl(req));
    return bounded(current, cancel, this.callTimeoutMs, 'session lease grant');
  }

  async #acquire(
    req: LockRequest,
    session: EtcdSession,
    signal: AbortSignal,
    leave: () => void,
  ): Promise<OwnedLock | null> {
    const prefix = namePrefix(this.namespace, req.key);
    const marker = markerKey(this.namespace, req.key);
    const call: MutexCall = {
      client: this.client,
      session,
      prefix,
      key: Buffer.from(prefix + session.leaseHex),
      value: req.payload ?? encodeHolder(req.owner, new Date()),
      callTimeoutMs: this.callTimeoutMs,
      onWake: () => {
        this.wakeups += 1;
      },
      alsoRead: marker,
    };
    // Subscribed before the Txn is sent: a delete of our key before the grant is seen too.
    const deletion = this.#deletionWatch().subscribe(call.key);
    const attempt = sendEnqueue(call);
    const callTimeoutMs = this.callTimeoutMs;
    const entry = new QueueEntry({ session, key: call.key, deletion, attempt, leave, callTimeoutMs });
    this.#inLine.set(req.key, call.key);
    try {
      const queued = await enqueue(call, attempt, signal);
      entry.enqueued(queued);
      if (!queued.owner && !req.wait) {
        await entry.abandon(signal);
        return null;
      }
      if (!queued.owner) await waitForTurn(call, queued, signal);
      // The marker the enqueue read is current only if we headed the queue then. None there and no
      // delay asked settles it at once (no call, no await); else clearLockDelay reads and writes.
      const seen = queued.owner ? queued.alsoRead : undefined;
      const delay = { delayMs: req.lockDelayMs, wait: req.wait, signal };
      const cleared =
        noDelayDue(seen, req.lockDelayMs) ||
        (await clearLockDelay({ ...call, alsoRead: marker }, queued, delay, seen));
      if (!cleared) {
        await entry.abandon(signal);
        return null;
      }
      return this.#grant(req, queued, entry);
    } catch (error) {
      // Timed out, aborted, cut off or refused: our key is taken back (closing: the lease's revoke
      // deletes it with the rest, no need to wait).
      await entry.abandon(signal);
      throw error;
    } finally {
      if (this.#inLine.get(req.key) === call.key) this.#inLine.delete(req.key);
    }
  }

  /** The handle of a granted key (a method of its own so its closures keep only what they need). */
  #grant(req: LockRequest, queued: Queued, entry: QueueEntry): OwnedLock {
    const { key, revision } = queued;
    const { session, deletion } = entry.parts;
    // The next local acquire may go only once our key is deleted: it would adopt it otherwise.
    const lock = sessionGrant(
      session,
      { key: req.key, fencingToken: revision, ownerToken: req.ownerToken },
      async () => {
        // Closing: the lease's revoke (shutdown) deletes every key of the session in one call, as
        // Go's Session.Close does; a delete per lock (100,000 at once) would saturate the client.
        if (this.closeSignal.aborted && req.lockDelayMs === 0) {
          entry.lost();
          return;
        }
        // With a lock-delay: key and marker in one Txn (a clean release starts no delay). Unanswered,
        // the session deletes the key alone, and the next holder waits out a delay it need not.
        if (req.lockDelayMs > 0) {
          const marker = markerKey(this.namespace, req.key);
          const answered = await releaseWithMarker(
            this.client,
            key,
            revision,
            marker,
            this.callTimeoutMs,
          ).then(
            () => true,
            () => false,
          );
          if (answered) {
            entry.lost();
            return;
          }
        }
        if (!(await entry.remove())) {
          throw new BackendUnavailableError('etcd: release not confirmed in time; the session retries it');
        }
      },
    );
    this.#keys.set(lock, { key, revision, session });
    // Lost with its session or its key (lease revoked, `etcdctl del`): at once. Either way the next
    // local acquire makes a new key (on a new session, or in place of the deleted one).
    loseWithSessionOrKey(lock, session, deletion, revision, () => entry.lost());
    return lock;
  }

  /**
   * Runs etcd operations (`provider.client.put(…)`, raw request ops) in one Txn that commits only
   * while `lock` is still held on the server (its key's create revision is unchanged). Resolves with
   * committed=false when it is not; throws NotHolderError for a lock this provider did not grant.
   */
  async guardedTxn(lock: Lock, ...ops: Array<IRequestOp | IOperation>): Promise<GuardedTxnResult> {
    const grant = this.#keys.get(lock);
    if (!grant) throw new NotHolderError(lock.key, 'this lock was not granted by this etcd provider');
    try {
      return await guardedTxn(this.client, grant.key, grant.revision, ops, this.callTimeoutMs);
    } catch (error) {
      throw unavailable('guarded txn failed', error);
    }
  }

  /**
   * Leader election with `etcdctl elect`'s layout. A campaign is an acquire without ttlMs of its own:
   * it uses the session of the provider's ttlMs when that was given, else the sessionTtlMs one.
   */
  election(name: string): EtcdElection {
    const host: ElectionHost = {
      client: this.client,
      namespace: this.namespace,
      callTimeoutMs: this.callTimeoutMs,
      campaignLock: (key, value, opts) => this.acquireWithPayload(key, value, opts),
      putIfHeld: async (lock, value) => {
        const grant = this.#keys.get(lock);
        if (!grant) return false;
        const put = { request_put: { key: grant.key, value: Buffer.from(value), ignore_lease: true } };
        return (await this.guardedTxn(lock, put)).committed;
      },
      refused: (error) => this.#refused(error),
    };
    return new EtcdElection(host, name);
  }

  /** "At most `limit` at once" under `name`: see semaphore.ts. */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    const adapter = new EtcdSemaphoreAdapter(name, {
      ...{ client: this.client, namespace: this.namespace, callTimeoutMs: this.callTimeoutMs },
      session: (ttlMs) => this.#sessions.current(ttlMs),
      woken: (kind) => {
        if (kind === 'release') this.semaphoreWakeups += 1;
        else this.semaphoreHandoffs += 1;
      },
      watchDeletion: (key) => this.#deletionWatch().subscribe(key),
      folder: (prefix) => this.#folder(prefix),
      refused: (error) => this.#refused(error),
    });
    return new GenericSemaphore(name, options, this.semaphoreContext(), adapter);
  }

  /** The provider's view of a semaphore's folder: made on first use, dropped when idle or closed. */
  #folder(prefix: Buffer): FolderView {
    const id = prefix.toString('latin1');
    const known = this.#folders.get(id);
    if (known) return known;
    const view = new FolderView(this.client, prefix, this.callTimeoutMs, () => {
      if (this.#folders.get(id) === view) this.#folders.delete(id);
    });
    this.#folders.set(id, view);
    return view;
  }

  #stopFolders(): void {
    for (const view of this.#folders.values()) view.stop();
    this.#folders.clear();
  }

  /** Readers share, a writer excludes everyone, in create-revision order: see read-write.ts. */
  protected override readWriteAdapter(name: string): ReadWriteAdapter {
    return new EtcdReadWriteAdapter(name, {
      ...{ client: this.client, namespace: this.namespace, callTimeoutMs: this.callTimeoutMs },
      session: (ttlMs) => this.#sessions.current(ttlMs),
      woken: () => {
        this.readWriteWakeups += 1;
      },
      watchDeletion: (key) => this.#deletionWatch().subscribe(key),
      refused: (error) => this.#refused(error),
    });
  }

  /** Read-write lock waiters woken by the deletion of the key they watched. */
  readWriteWakeups = 0;

  /**
   * Semaphore waiters woken: `semaphoreWakeups` counts front waiters woken by a change of their
   * view that lets them in (at most one per released permit); `semaphoreHandoffs` counts waiters
   * behind the front woken by the leaving of the one queue key they watch (they read the queue
   * again, and may still be behind). No grant is handed on through the queue: each request grants
   * itself.
   */
  semaphoreWakeups = 0;
  semaphoreHandoffs = 0;

  /** Grants a session whose lease lasts ttlMs (whole seconds); EtcdSessions decides when. */
  #openSession(ttlMs: number): Promise<EtcdSession> {
    // The deletion watch is confirmed before any key of the session exists, in parallel with the
    // grant (no round trip added); if it is not within callTimeoutMs, the session goes on without
    // waiting (the keepalive still reports a revoked lease).
    const watching = this.#deletionWatch().ready;
    const watched = bounded(watching, undefined, this.callTimeoutMs, 'deletion watch').catch(() => undefined);
    let granted: EtcdSession | undefined;
    const granting = EtcdSession.open(this.client, {
      ttlMs,
      driftRate: this.driftRate,
      callTimeoutMs: this.callTimeoutMs,
      // A failed keepalive is announced for the locks of this session, not those of other TTLs.
      onRenewal: this.sessionRenewalOf((lock) => this.#keys.get(lock)?.session === granted),
    });
    void granting.then(
      (session) => {
        granted = session;
      },
      () => undefined, // reported to the caller below
    );
    const opening = Promise.all([granting, watched]).then(([session]) => session);
    opening.then(
      (session) => {
        this.#granted = session;
        // etcd answered: a semaphore's or read-write lock's wait rides through outages (its
        // session lost while it waits, say) from now on, as a lock's does once it has a session.
        noteReached(this.semaphoreContext());
      },
      () => undefined, // the caller hears of it; the next acquire grants another
    );
    return opening;
  }

  /**
   * A wait that runs out is an outage (BackendUnavailableError) unless etcd is answering: the last
   * session granted (of any TTL) is alive, and its last keepalive was answered.
   */
  protected override backendReachable(): boolean {
    return this.#granted?.answering === true;
  }

  /** The provider's one deletion watch, made before its first session. */
  #deletionWatch(): DeletionWatch {
    this.#deletions ??= new DeletionWatch(this.client, this.namespace);
    return this.#deletions;
  }

  /** @internal For tests that inspect the session (its listeners): the sessionTtlMs one, if any. */
  currentSessionForTests(): Promise<EtcdSession | undefined> {
    return this.#sessions.defaultSession();
  }

  /** Revokes the sessions (bounded by callTimeoutMs in all: etcd may be unreachable), then disconnects. */
  protected async shutdown(): Promise<void> {
    const closing = (async () => {
      const sessions = await this.#sessions.all();
      await Promise.all(sessions.map((session) => session.close(true)));
    })();
    await bounded(closing, undefined, this.callTimeoutMs, 'close').catch(() => undefined);
    this.#stopFolders();
    this.#deletions?.close();
    this.client.close();
    endWatchStream(this.client); // etcd may not answer the watches' cancels: see endWatchStream
  }

  /**
   * For tests of holder death: stops keepalives and drops the connection without revoking the
   * leases, as a killed process would. Its keys stay until their session's TTL runs out.
   */
  async abandon(): Promise<void> {
    for (const session of await this.#sessions.all()) await session.close(false);
    this.#stopFolders();
    this.#deletions?.close();
    this.client.close();
    endWatchStream(this.client);
  }
}

/** A probe of the servers' TLS waits this long at most (within callTimeoutMs). */
const PROBE_TIMEOUT_MS = 3_000;
/** Calls failing within this long after a probe take its verdict instead of probing again. */
const PROBE_REUSE_MS = 2_000;

/** host:port of an endpoint (`https://h:2379`, `h:2379`, `[::1]:2379`); etcd's port when none. */
function endpointHost(endpoint: string): HostPort {
  const url = new URL(/^[a-z]+:\/\//i.test(endpoint) ? endpoint : `https://${endpoint}`);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 2379) };
}

/** The provider `connect()` opens for an `etcd://` URL. */
export async function createProvider(
  spec: ConnectionSpec,
  options: ConnectOptions,
): Promise<EtcdLockProvider> {
  // connect() resolved the URL's TLS parameters and the tls option into options.tls.
  const sessionTtl = spec.params.get('sessionTtlMs');
  return new EtcdLockProvider({
    ...(options as Partial<EtcdProviderOptions>),
    ...urlClientOptions(spec, options),
    ...(sessionTtl ? { sessionTtlMs: Number(sessionTtl) } : {}),
  });
}
