import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { withinGrace } from '../../src/cancel-grace.js';
import { monotonicNow } from '../../src/clock.js';
import type { ConnectOptions } from '../../src/connect-options.js';
import type { ConnectionSpec } from '../../src/connection-url.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { guardSockets } from '../../src/ioredis-sockets.js';
import { KeyedFifo } from '../../src/keyed-fifo.js';
import { leasedLock } from '../../src/lease-renewal.js';
import type { OwnedLock } from '../../src/ownership.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../../src/provider-base.js';
import type { ReadWriteAdapter } from '../../src/read-write/core.js';
import { GenericSemaphore } from '../../src/semaphore/core.js';
import type { Semaphore, SemaphoreOptions } from '../../src/semaphore/types.js';
import type { TlsOptions } from '../../src/tls.js';
import type { HolderInfo, LockInfo, QueuedWaiter } from '../../src/types.js';
import { validateKey } from '../../src/validate.js';
import { lineUp } from '../../src/waiter-queue.js';
import { boundedCall, Reachability } from './bounded-call.js';
import { extendHanded, type HandedGrant, refusalFence, WaiterEar } from './hand-over.js';
import { CleanUpDue, Leftovers } from './leftovers.js';
import { heldNamesScan, LOCK_HELD_SUFFIX } from './list.js';
import { asIoredis, isNodeRedisClient, type NodeRedisClient } from './node-redis.js';
import { WaiterNotices } from './notices.js';
import { RedisReadWriteAdapter, type RedisReadWriteClient } from './read-write.js';
import { READ_WRITE_HELD_SUFFIX } from './read-write-scripts.js';
import { type AcquireAnswer, type LockKeys, LockScripts, lockKeys, validatePrefix } from './scripts.js';
import { RedisSemaphoreAdapter, type RedisSemaphoreClient } from './semaphore.js';
import { redisTls } from './tls.js';

/** Options of `new RedisLockProvider(options)`, and the Redis options `connect()` passes on. */
export interface RedisProviderOptions extends ProviderDefaults {
  /** redis://[:password@]host:port[/db], or `redis` for every ioredis option. */
  url?: string;
  redis?: RedisOptions;
  /**
   * A Redis Cluster: its seed nodes ("host:port" or { host, port }) and ioredis Cluster options
   * (each node's connection also takes `redis`). Every name's keys share one hash slot.
   */
  cluster?: { nodes: Array<string | { host: string; port: number }>; options?: ClusterOptions };
  /**
   * A client of your own instead of one the provider opens: an ioredis Redis or Cluster, or a
   * connected node-redis (`redis` v5/v6) client, so its TLS, Sentinel or Cluster settings are
   * reused. close() leaves it open (the provider opens and closes only its notice subscriber, a
   * duplicate of it).
   */
  client?: Redis | Cluster | NodeRedisClient;
  /**
   * TLS towards Redis (a `rediss://` url asks for it too): the authorities to trust, a client
   * certificate and key, the server name to check. Over it, `redis.tls` is ioredis's own.
   */
  tls?: TlsOptions | boolean;
  /** ioredis options for the connection that receives hand-over notices, over those of `redis`. */
  subscriber?: RedisOptions;
  /** Prefix of every key. Default 'fencekit:'. */
  prefix?: string;
  /**
   * Fair (default): waiters are granted in arrival order through a queue the scripts keep, and a
   * release hands the key to the next one directly. false: whoever retries first wins (a client
   * that just released can win again while others wait).
   */
  fair?: boolean;
  /** Longest sleep between two attempts of a waiter that was not woken. Default 500 ms. */
  maxPollMs?: number;
}

/** What shutdown() may spend on leftovers and QUIT before it cuts the connections. */
const SHUTDOWN_MS = 800;

/**
 * Locks on one Redis: `SET NX PX` and the fencing counter's INCR in one script, compare-and-delete
 * release that hands the key to the next waiter and tells it on a pub/sub channel (fair mode) or
 * invites it to try (fair: false), a watchdog that renews every ttl/3
 * and aborts the signal before the key can expire. Safe only while Redis loses no acknowledged
 * write: see docs/design.md.
 */
export class RedisLockProvider extends BaseLockProvider {
  readonly backend = 'redis' as const;
  protected override readonly lockDelaySupported = true;
  readonly redis: Redis | Cluster;
  readonly prefix: string;
  /** Whether close() quits this.redis (false for a client passed in). */
  readonly #ownsClient: boolean;
  readonly fair: boolean;
  readonly #scripts: LockScripts;
  readonly #notices: WaiterNotices;
  readonly #maxPollMs: number;
  readonly #waiterTtlMs: number;
  readonly #renewing = new Set<OwnedLock>();
  readonly #reachability: Reachability;
  /** Leaves and releases whose first try failed, retried until done (the provider owns them). */
  readonly #leftovers = new Leftovers();
  /**
   * Acquires of one name inside this provider take turns here before one of them queues in Redis:
   * the queue holds a waiter per process, not per request, so the polls of waiters that missed a
   * notice stay few however many wait in each process (1,000 waiters polling every maxPollMs were
   * most of the server's work). A turn ends once its request is granted, so the next one waits in
   * Redis, in its place by when it was asked for, while the grant is held.
   */
  readonly #local = new KeyedFifo();
  /** Per name, the ownerToken of this provider's request in the name's queue in Redis, while it waits there. */
  readonly #waitingInRedis = new Map<string, string>();
  /** Release notices that woke a waiter of this provider (one per handoff in fair mode). */
  wakeups = 0;

  constructor(options: RedisProviderOptions) {
    super(options);
    this.prefix = validatePrefix(options.prefix ?? 'fencekit:');
    this.fair = options.fair ?? true;
    this.#maxPollMs = options.maxPollMs ?? 500;
    if (!(this.#maxPollMs >= 10)) throw new InvalidArgumentError('maxPollMs', 'must be at least 10 ms');
    // A live waiter refreshes its place at least every maxPollMs; five missed refreshes mean it is gone.
    this.#waiterTtlMs = Math.max(5 * this.#maxPollMs, 2_000);
    const tls = redisTls(options.tls, options.url);
    const redisOptions: RedisOptions = {
      commandTimeout: this.callTimeoutMs,
      maxRetriesPerRequest: 1, // scripts are safe to replay (keyed by ownerToken), but not forever
      retryStrategy: (times) => Math.min(times * 50, 1_000),
      ...(tls ? { tls } : {}),
      ...options.redis,
    };
    this.#ownsClient = options.client === undefined;
    const own = options.client;
    this.redis =
      (isNodeRedisClient(own) ? asIoredis(own, this.callTimeoutMs) : own) ??
      guardSockets(
        options.cluster
          ? new Cluster(options.cluster.nodes, {
              ...options.cluster.options,
              redisOptions: { ...redisOptions, ...options.cluster.options?.redisOptions },
            })
          : options.url
            ? clientForUrl(options.url, redisOptions)
            : new Redis(redisOptions),
      );
    this.redis.on('error', () => undefined); // reconnects by itself; calls report their own errors
    this.#reachability = new Reachability(this.redis, 'redis');
    this.#reachability.onceConnected(() => this.noteReached());
    this.#scripts = new LockScripts(this.redis);
    this.#notices = new WaiterNotices(this.redis, this.prefix, options.subscriber);
  }

  /** The keys of a name, all on the hash tag {name}. */
  keys(name: string): LockKeys {
    return lockKeys(this.prefix, name);
  }

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key, 'key', { allowReserved: true }); // reads only: reaches no semaphore's nodes
    this.assertOpen();
    const [pttl, token, owner, since, waiters, , delayLeftMs] = await this.#call('inspect', () =>
      this.#scripts.inspect(this.keys(key)),
    );
    const held = pttl > 0 && token !== null;
    const delayed = delayLeftMs > 0;
    if (!held && waiters === 0 && !delayed) return null;
    const holder = held
      ? {
          owner: owner === '' || owner === null ? undefined : owner,
          fencingToken: BigInt(token),
          since: since ? new Date(Number(since)) : undefined,
          expiresAt: new Date(Date.now() + pttl),
        }
      : null;
    return {
      key,
      holder,
      // This provider's requests lined up behind its own one in the queue wait too.
      waiters: waiters + this.#local.behind(key),
      ...(delayed ? { delayedUntil: new Date(Date.now() + delayLeftMs) } : {}),
    };
  }

  /**
   * The live waiters in the name's queue in Redis, one per process (its line's turn), by arrival:
   * ours stands for our line, another process's for a line we cannot see.
   */
  protected override async queuedWaiters(key: string, limit: number): Promise<QueuedWaiter[]> {
    const queued = await this.#call(
      'queue',
      () => this.#scripts.queue(this.keys(key), limit),
      this.closeSignal, // close() ends the read
    );
    const ours = this.#waitingInRedis.get(key);
    const entries = queued.map(({ ownerToken, owner, since }) => ({
      owner,
      since,
      ours: ownerToken === ours,
    }));
    return lineUp(entries, this.#local.behind(key), limit);
  }

  /**
   * One script removes the grant (guarded by its token when given) and hands the key over; the
   * holder learns 'revoked' at its next renewal (within ttl/3) from the marker the script leaves.
   */
  protected async removeGrant(key: string, expected: bigint | undefined): Promise<HolderInfo | null> {
    const guard = { holder: '', token: expected?.toString() ?? '' };
    const removed = await this.#call('force-release', () =>
      this.#scripts.forceRelease(this.keys(key), guard, this.fair),
    );
    return removed && { owner: removed.owner, fencingToken: removed.token, since: removed.since };
  }

  /**
   * SCAN for the lock keys and read-write grants keys under the prefix (every master of a cluster);
   * each exists only while its name is held.
   */
  protected async heldNames(prefix: string): Promise<string[]> {
    const call = <T>(what: string, run: () => Promise<T>) => this.#call(what, run);
    const { redis } = this;
    const suffixes = [LOCK_HELD_SUFFIX, READ_WRITE_HELD_SUFFIX];
    const scan = { keyPrefix: this.prefix, namePrefix: prefix, suffixes, call };
    if (!(redis instanceof Cluster)) return heldNamesScan({ nodes: [redis], ...scan });
    // The client knows every master once it has loaded the slots: a command through the cluster
    // waits for that (a client seeded with one node would otherwise scan that node alone).
    await call('list', () => redis.ping());
    return heldNamesScan({ nodes: redis.nodes('master'), ...scan });
  }

  /** "At most `limit` at once" under `name`: see semaphore.ts. */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    const adapter = new RedisSemaphoreAdapter(name, this.#queuedClient());
    return new GenericSemaphore(name, options, this.semaphoreContext(), adapter);
  }

  /** Readers share, a writer excludes, in request order: see read-write.ts. */
  protected override readWriteAdapter(name: string): ReadWriteAdapter {
    return new RedisReadWriteAdapter(name, this.#queuedClient());
  }

  /** What semaphores and read-write locks borrow: the connection, notices, clean-up owner. */
  #queuedClient(): RedisSemaphoreClient & RedisReadWriteClient {
    const { driftRate, redis, prefix } = this;
    return {
      ...{ redis, prefix, driftRate, notices: this.#notices, leftovers: this.#leftovers },
      ...{ maxPollMs: this.#maxPollMs, waiterTtlMs: this.#waiterTtlMs, callTimeoutMs: this.callTimeoutMs },
      call: (what, run, cancel) => this.#call(what, run, cancel),
      reachable: () => this.backendReachable(),
      woken: () => {
        this.wakeups += 1;
      },
    };
  }

  protected async request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    // A request that must not wait (tryAcquire, waitMs 0) does not line up behind a local one.
    return this.#local.requestInTurn(req.key, req.wait, cancel, () => this.#queue(req, cancel));
  }

  /**
   * One request in the name's queue in Redis: its attempts, its wait, its clean-up. Each attempt
   * says how long ago the acquire was asked for (its wait in this process's line and any retry
   * included), so that a place queued again after it lapsed is still taken by arrival.
   */
  async #queue(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const keys = this.keys(req.key);
    const args = {
      ownerToken: req.ownerToken,
      ttlMs: req.ttlMs,
      owner: req.owner ?? '',
      wait: req.wait,
      fair: this.fair,
      waiterTtlMs: this.#waiterTtlMs,
      channel: req.wait ? this.#notices.channel : '',
      lockDelayMs: req.lockDelayMs,
    };
    const cleanUp = new CleanUpDue(this.#leftovers, req.ownerToken);
    const attempt = () => {
      const asked = { ...args, waitedMs: monotonicNow() - req.askedAt };
      return cleanUp.attempt(this.#call('acquire', () => this.#scripts.acquire(keys, asked), cancel));
    };
    try {
      if (!req.wait) {
        const sentAt = monotonicNow();
        const answer = await attempt();
        return typeof answer === 'string' ? this.#grant(req, keys, BigInt(answer), sentAt) : null;
      }
      return await this.#wait(req, keys, attempt, cancel);
    } catch (error) {
      // Timed out, aborted or failed, maybe with the script run or still to run: leave the queue,
      // give back a grant made meanwhile, hand the key on if it is free. The leftovers own it
      // (retried until done), so the caller is not held up by an unreachable Redis.
      if (cleanUp.due)
        this.#leftovers.add(req.ownerToken, () =>
          this.#call('leave', () => this.#scripts.leave(keys, req.ownerToken, this.fair)),
        );
      throw error;
    }
  }

  /**
   * A waiting request: the first attempt also queues us when the key is busy (fairness counts from
   * there), then we listen for release notices and poll for expiries. Any failed attempt ends the
   * request with BackendUnavailableError (the base provider retries within waitMs).
   */
  async #wait(
    req: LockRequest,
    keys: LockKeys,
    attempt: () => Promise<AcquireAnswer>,
    cancel: AbortSignal,
  ): Promise<OwnedLock> {
    const ear = new WaiterEar(this.#notices, req.ownerToken, this.fair, () => {
      this.wakeups += 1;
    });
    const { inbox } = ear;
    // A handed grant lasts at least until our place in the queue would have lapsed (the release
    // script caps it there, so that a dead waiter blocks the key no longer): until then we extend it.
    const provisionalMs = Math.min(req.ttlMs, this.#waiterTtlMs);
    const takeHanded = (): OwnedLock | undefined => {
      const handed = inbox.handed(provisionalMs);
      return handed && this.#adoptHanded(req, keys, handed, provisionalMs);
    };
    this.#waitingInRedis.set(req.key, req.ownerToken); // our line's turn, in Redis from its first attempt
    try {
      let sentAt = monotonicNow();
      let answer = await attempt();
      if (typeof answer === 'string') return this.#grant(req, keys, BigInt(answer), sentAt);
      inbox.refused(sentAt, refusalFence(answer));
      // If the channel was not subscribed yet, try once more at once: a release that came before
      // the subscription has made us first without a notice.
      const tryAgainAtOnce = !this.#notices.subscribed;
      // Best effort: without the subscription the waiter polls, so it waits for it no longer than
      // one poll (a hand-over it cannot hear must be adopted by a poll before it lapses).
      const subscribeMs = Math.min(this.callTimeoutMs, this.#maxPollMs);
      await boundedCall('redis', 'subscribe', () => ear.listen().subscribed, subscribeMs, cancel).catch(
        () => undefined,
      );
      const delays = jitteredDelays({ initialMs: this.#maxPollMs / 2, maxMs: this.#maxPollMs });
      for (let round = 0; ; round++) {
        if (cancel.aborted) throw cancel.reason;
        const taken = takeHanded();
        if (taken) return taken;
        // A notice that came while an attempt was in flight (its answer predates the release)
        // makes the next attempt start at once.
        if ((round > 0 || !tryAgainAtOnce) && !inbox.noticed) {
          // A release announces itself; polling is for grants that expire without a word (the
          // holder died), so a waiter sleeps until the current grant would expire, at most maxPollMs.
          const untilExpiry = Math.max(-answer[0], 5);
          const sleep = sleepUnlessWoken(Math.min(untilExpiry, delays.next().value), cancel);
          ear.wake = sleep.wake;
          await sleep.done;
          const handedMeanwhile = takeHanded();
          if (handedMeanwhile) return handedMeanwhile;
        }
        inbox.noticed = false;
        sentAt = monotonicNow();
        const next: AcquireAnswer = await attempt();
        if (typeof next === 'string') return this.#grant(req, keys, BigInt(next), sentAt);
        answer = next;
        inbox.refused(sentAt, refusalFence(answer));
      }
    } finally {
      ear.stop();
      if (this.#waitingInRedis.get(req.key) === req.ownerToken) this.#waitingInRedis.delete(req.key);
    }
  }

  /** A grant a release handed us: see extendHanded. */
  #adoptHanded(req: LockRequest, keys: LockKeys, handed: HandedGrant, provisionalMs: number): OwnedLock {
    return extendHanded(this.#grant(req, keys, handed.token, handed.sentAt, handed.rttMs), handed, {
      provisionalMs,
      ttlMs: req.ttlMs,
      driftRate: this.driftRate,
      renew: () => this.#call('renew', () => this.#scripts.renew(keys, req.ownerToken, req.ttlMs)),
    });
  }

  #grant(req: LockRequest, keys: LockKeys, token: bigint, sentAt: number, rttMs?: number): OwnedLock {
    const lock = leasedLock({
      key: req.key,
      fencingToken: token,
      ownerToken: req.ownerToken,
      releaseOnBackend: async () => {
        const release = () =>
          this.#call('release', () => this.#scripts.release(keys, req.ownerToken, this.fair));
        await release().catch((error: unknown) => {
          this.#leftovers.add(req.ownerToken, release); // guarded: retried until Redis answers
          throw error;
        });
      },
      ttlMs: req.ttlMs,
      driftRate: this.driftRate,
      grantedSentAt: sentAt,
      ...(rttMs === undefined ? {} : { grantedRttMs: rttMs }),
      renew: () => this.#call('renew', () => this.#scripts.renew(keys, req.ownerToken, req.ttlMs)),
    });
    this.#renewing.add(lock);
    lock.onEnd(() => this.#renewing.delete(lock));
    return lock;
  }

  /** One command with the deadline and, for requests, their cancel signal; fails at once when unreachable. */
  #call<T>(what: string, run: () => Promise<T>, cancel?: AbortSignal): Promise<T> {
    try {
      this.#reachability.check(what);
    } catch (error) {
      return Promise.reject(error);
    }
    return boundedCall('redis', what, run, this.callTimeoutMs, cancel, this.#reachability).then((answer) => {
      this.noteReached();
      return answer;
    });
  }

  /** A wait that ran out while no connection was ready is an outage, not a timeout. */
  protected override backendReachable(): boolean {
    return this.#reachability.connected;
  }

  protected async shutdown(): Promise<void> {
    this.#notices.close();
    // Bounded (within the base's 1 s for shutdown): one more try at the leftovers, then QUIT;
    // whatever is not done by then is cut.
    await withinGrace(
      (async () => {
        await this.#leftovers.flush();
        if (this.#ownsClient) await this.redis.quit().catch(() => undefined);
      })(),
      Math.min(this.callTimeoutMs, SHUTDOWN_MS),
    );
    this.#leftovers.close();
    if (this.#ownsClient) this.redis.disconnect();
  }

  /**
   * For tests of holder death: stops every watchdog and drops the connections without releasing,
   * as a killed process would; its keys expire after their TTL.
   */
  async abandon(): Promise<void> {
    for (const lock of this.#renewing) lock.lose('closed');
    this.#notices.close();
    this.#leftovers.close();
    this.redis.disconnect();
  }
}

/** ioredis refuses a malformed URL with a TypeError whose `input` is the URL, password and all. */
function clientForUrl(url: string, redisOptions: RedisOptions): Redis {
  try {
    return new Redis(url, redisOptions);
  } catch {
    throw new InvalidArgumentError(
      'url',
      'ioredis cannot read it as redis://[user:password@]host[:port][/db]',
    );
  }
}

/** The provider `connect()` opens for a `redis://` or `redis+cluster://` URL (`rediss` for TLS). */
export async function createProvider(
  spec: ConnectionSpec,
  options: ConnectOptions,
): Promise<RedisLockProvider> {
  const params = spec.params;
  // redis+cluster://h1:p1,h2:p2,h3:p3: the seed nodes of a Redis Cluster.
  const cluster = /^rediss?\+cluster:/i.test(spec.url)
    ? {
        cluster: {
          nodes: spec.hosts,
          options: {
            redisOptions: {
              ...(spec.username === undefined ? {} : { username: spec.username }),
              ...(spec.password === undefined ? {} : { password: spec.password }),
            },
          },
        },
      }
    : { url: spec.url.replace(/\?.*$/, '') };
  return new RedisLockProvider({
    ...(options as Partial<RedisProviderOptions>),
    ...cluster,
    ...(params.has('prefix') ? { prefix: params.get('prefix') as string } : {}),
    ...(params.has('fair') ? { fair: params.get('fair') !== 'false' && params.get('fair') !== '0' } : {}),
  });
}
