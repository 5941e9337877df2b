import { Redis, type RedisOptions } from 'ioredis';
import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { monotonicNow } from '../../src/clock.js';
import type { ConnectionSpec, ConnectOptions } from '../../src/connect.js';
import { BackendUnavailableError, InvalidArgumentError } from '../../src/errors.js';
import { leasedLock } from '../../src/lease-renewal.js';
import type { OwnedLock } from '../../src/ownership.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../../src/provider-base.js';
import type { LockInfo } from '../../src/types.js';
import { validateKey } from '../../src/validate.js';
import { WaiterInbox } from './hand-over.js';
import { WaiterNotices } from './notices.js';
import { type LockKeys, LockScripts, lockKeys } from './scripts.js';

export interface RedisProviderOptions extends ProviderDefaults {
  /** redis://[:password@]host:port[/db], or `redis` for every ioredis option. */
  url?: string;
  redis?: RedisOptions;
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
  /** Deadline of each command. Default 2 000 ms. */
  callTimeoutMs?: number;
}

/** Consecutive failed attempts (unreachable Redis) after which a waiting acquire gives up. */
const MAX_FAILED_ATTEMPTS = 5;

/**
 * Locks on one Redis: `SET NX PX` and the fencing counter's INCR in one script, compare-and-delete
 * release that hands the key to the next waiter and tells it on a pub/sub channel (fair mode) or
 * invites it to try (fair: false), a watchdog that renews every ttl/3
 * and aborts the signal before the key can expire. Safe only while Redis loses no acknowledged
 * write: see the README.
 */
export class RedisLockProvider extends BaseLockProvider {
  readonly backend = 'redis' as const;
  readonly redis: Redis;
  readonly prefix: string;
  readonly fair: boolean;
  readonly #scripts: LockScripts;
  readonly #notices: WaiterNotices;
  readonly #maxPollMs: number;
  readonly #waiterTtlMs: number;
  readonly #renewing = new Set<OwnedLock>();
  /** Release notices that woke a waiter of this provider (one per handoff in fair mode). */
  wakeups = 0;

  constructor(options: RedisProviderOptions) {
    super(options);
    this.prefix = options.prefix ?? 'fencekit:';
    this.fair = options.fair ?? true;
    this.#maxPollMs = options.maxPollMs ?? 500;
    if (!(this.#maxPollMs >= 10)) throw new InvalidArgumentError('maxPollMs', 'must be at least 10 ms');
    // A live waiter refreshes its place at least every maxPollMs; five missed refreshes mean it is gone.
    this.#waiterTtlMs = Math.max(5 * this.#maxPollMs, 2_000);
    const redisOptions: RedisOptions = {
      commandTimeout: options.callTimeoutMs ?? 2_000,
      maxRetriesPerRequest: 1, // scripts are safe to replay (keyed by ownerToken), but not forever
      retryStrategy: (times) => Math.min(times * 50, 1_000),
      ...options.redis,
    };
    this.redis = options.url ? new Redis(options.url, redisOptions) : new Redis(redisOptions);
    this.redis.on('error', () => undefined); // reconnects by itself; calls report their own errors
    this.#scripts = new LockScripts(this.redis);
    this.#notices = new WaiterNotices(this.redis, this.prefix, options.subscriber);
  }

  /** The keys of a name, all on the hash tag {name}. */
  keys(name: string): LockKeys {
    return lockKeys(this.prefix, name);
  }

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key);
    this.assertOpen();
    const [pttl, token, owner, since, waiters] = await this.#call('inspect', () =>
      this.#scripts.inspect(this.keys(key)),
    );
    const held = pttl > 0 && token !== null;
    if (!held && waiters === 0) return null;
    const holder = held
      ? {
          owner: owner === '' || owner === null ? undefined : owner,
          fencingToken: BigInt(token),
          since: since ? new Date(Number(since)) : undefined,
          expiresAt: new Date(Date.now() + pttl),
        }
      : null;
    return { key, holder, waiters };
  }

  protected async request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const keys = this.keys(req.key);
    const args = {
      ownerToken: req.ownerToken,
      ttlMs: req.ttlMs,
      owner: req.owner ?? '',
      wait: req.wait,
      fair: this.fair,
      waiterTtlMs: this.#waiterTtlMs,
      channel: req.wait ? this.#notices.channel : '',
    };
    const run = () => this.#scripts.acquire(keys, args);
    if (!req.wait) {
      // One retry: when the first answer was lost the script may have granted already, and the
      // second call then returns that grant instead of leaving an orphan until its TTL.
      for (let attempt = 0; ; attempt++) {
        const sentAt = monotonicNow();
        try {
          const answer = await this.#call('acquire', run);
          return typeof answer === 'string' ? this.#grant(req, keys, BigInt(answer), sentAt) : null;
        } catch (error) {
          if (attempt >= 1 || cancel.aborted) throw error;
        }
      }
    }
    // Uncontended: one script call, which also queues us when the key is busy (fairness counts from
    // here). Then listen for release notices. If the channel was not subscribed yet, try once more
    // at once: a release that came before the subscription has made us first without a notice.
    let sentAt = monotonicNow();
    let answer = await this.#call('acquire', run).catch(() => null);
    if (typeof answer === 'string') return this.#grant(req, keys, BigInt(answer), sentAt);
    const inbox = new WaiterInbox(req.ownerToken, this.fair);
    if (answer !== null) inbox.refused(sentAt, BigInt(answer[1]));
    const tryAgainAtOnce = !this.#notices.subscribed;
    let wake: () => void = () => undefined;
    const unsubscribe = await this.#notices.listen(req.ownerToken, (message) => {
      if (!inbox.notice(message)) return;
      this.wakeups += 1;
      wake();
    });
    const takeHanded = (): OwnedLock | undefined => {
      const handed = inbox.handed(req.ttlMs);
      return handed && this.#grant(req, keys, handed.token, handed.sentAt, handed.rttMs);
    };
    try {
      const delays = jitteredDelays({ initialMs: this.#maxPollMs / 2, maxMs: this.#maxPollMs });
      let failures = answer === null ? 1 : 0;
      for (let attempt = 0; ; attempt++) {
        if (cancel.aborted) throw cancel.reason;
        const taken = takeHanded();
        if (taken) return taken;
        // A notice that came while an attempt was in flight (its answer predates the release)
        // makes the next attempt start at once.
        if ((attempt > 0 || !tryAgainAtOnce) && !inbox.noticed) {
          // A release announces itself; polling is for grants that expire without a word (the
          // holder died), so a waiter sleeps until the current grant would expire, at most maxPollMs.
          const untilExpiry = Array.isArray(answer) ? Math.max(-answer[0], 5) : this.#maxPollMs;
          const sleep = sleepUnlessWoken(Math.min(untilExpiry, delays.next().value), cancel);
          wake = sleep.wake;
          await sleep.done;
          const handedMeanwhile = takeHanded();
          if (handedMeanwhile) return handedMeanwhile;
        }
        inbox.noticed = false;
        sentAt = monotonicNow();
        try {
          answer = await this.#call('acquire', run);
          failures = 0;
        } catch (error) {
          // A lost answer is retried (the script adopts a grant it already made), a dead server not forever.
          if (cancel.aborted) throw cancel.reason;
          if (++failures >= MAX_FAILED_ATTEMPTS) throw error;
          answer = null;
        }
        if (typeof answer === 'string') return this.#grant(req, keys, BigInt(answer), sentAt);
        if (answer !== null) inbox.refused(sentAt, BigInt(answer[1]));
      }
    } catch (error) {
      // Timed out, aborted or failed: leave the queue, give back a grant handed to us meanwhile,
      // and hand the key on if it is free.
      await this.#scripts.leave(keys, req.ownerToken, this.fair).catch(() => undefined);
      throw error;
    } finally {
      unsubscribe();
    }
  }

  #grant(req: LockRequest, keys: LockKeys, token: bigint, sentAt: number, rttMs?: number): OwnedLock {
    const lock = leasedLock({
      key: req.key,
      fencingToken: token,
      ownerToken: req.ownerToken,
      releaseOnBackend: async () => {
        await this.#call('release', () => this.#scripts.release(keys, req.ownerToken, this.fair));
      },
      ttlMs: req.ttlMs,
      driftRate: this.driftRate,
      grantedSentAt: sentAt,
      ...(rttMs === undefined ? {} : { grantedRttMs: rttMs }),
      renew: () => this.#scripts.renew(keys, req.ownerToken, req.ttlMs),
    });
    this.#renewing.add(lock);
    lock.onEnd(() => this.#renewing.delete(lock));
    return lock;
  }

  #call<T>(what: string, run: () => Promise<T>): Promise<T> {
    return run().catch((error: unknown) => {
      throw new BackendUnavailableError(`redis: ${what} failed: ${(error as Error).message}`, {
        cause: error,
      });
    });
  }

  protected async shutdown(): Promise<void> {
    this.#notices.close();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  /**
   * For tests of holder death: stops every watchdog and drops the connections without releasing,
   * as a killed process would; its keys expire after their TTL.
   */
  async abandon(): Promise<void> {
    for (const lock of this.#renewing) lock.lose('closed');
    this.#notices.close();
    this.redis.disconnect();
  }
}

export async function createProvider(
  spec: ConnectionSpec,
  options: ConnectOptions,
): Promise<RedisLockProvider> {
  const params = spec.params;
  return new RedisLockProvider({
    ...(options as Partial<RedisProviderOptions>),
    url: spec.url.replace(/\?.*$/, ''),
    ...(params.has('prefix') ? { prefix: params.get('prefix') as string } : {}),
    ...(params.has('fair') ? { fair: params.get('fair') !== 'false' && params.get('fair') !== '0' } : {}),
  });
}
