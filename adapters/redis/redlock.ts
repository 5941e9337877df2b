import { Redis, type RedisOptions } from 'ioredis';
import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { withinGrace } from '../../src/cancel-grace.js';
import { monotonicNow } from '../../src/clock.js';
import { AuthenticationError, BackendUnavailableError, InvalidArgumentError } from '../../src/errors.js';
import { guardSockets } from '../../src/ioredis-sockets.js';
import { leasedLock } from '../../src/lease-renewal.js';
import type { OwnedLock } from '../../src/ownership.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../../src/provider-base.js';
import type { TlsOptions } from '../../src/tls.js';
import type { HolderInfo, LockInfo } from '../../src/types.js';
import { validateKey } from '../../src/validate.js';
import { boundedCall, Reachability } from './bounded-call.js';
import { Leftovers } from './leftovers.js';
import { heldNamesScan } from './list.js';
import { asIoredis, isNodeRedisClient, type NodeRedisClient } from './node-redis.js';
import {
  type AcquireAnswer,
  type InspectAnswer,
  type LockKeys,
  LockScripts,
  lockKeys,
  validatePrefix,
} from './scripts.js';
import { redisTls } from './tls.js';

/** Options of `new RedlockProvider(options)`, and the Redlock options `connect()` passes on. */
export interface RedlockProviderOptions extends ProviderDefaults {
  /**
   * Independent Redis instances (not replicas of one another): at least 3, an odd number. Each a
   * URL, ioredis options, or a client of your own (ioredis or node-redis), which close() leaves open.
   */
  instances: Array<string | RedisOptions | Redis | NodeRedisClient>;
  prefix?: string;
  /**
   * TLS towards the instances the provider opens (those given as URLs or options; `rediss://`
   * URLs ask for it too). Clients of your own keep their settings.
   */
  tls?: TlsOptions | boolean;
  /** Longest sleep between two attempts of a waiter. Default 200 ms. */
  maxPollMs?: number;
}

type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** What shutdown() may spend on leftovers and QUIT before it cuts the connections. */
const SHUTDOWN_MS = 800;

/**
 * Redlock over N independent instances: a grant needs the lock key on a majority within its
 * validity (ttl − time spent − drift); renewals and releases go to all. The fencing token is the
 * largest of the majority's counters, and before the grant is handed out every counter of that
 * majority is raised to it: any two majorities share an instance, so the next grant's token is
 * larger — as long as no instance loses writes (a restart without persistence resets its keys and
 * counters: then neither exclusion nor token order holds; see docs/design.md).
 */
export class RedlockProvider extends BaseLockProvider {
  readonly backend = 'redlock' as const;
  readonly instances: Redis[];
  readonly #scripts: LockScripts[];
  readonly prefix: string;
  readonly quorum: number;
  readonly #maxPollMs: number;
  readonly #waiterTtlMs: number;
  readonly #renewing = new Set<OwnedLock>();
  readonly #reachability: Reachability[];
  /** Leaves and releases whose first try failed on some instance, retried until done. */
  readonly #leftovers = new Leftovers();
  /** The instances this provider opened (it quits only those). */
  readonly #owned = new Set<Redis>();

  constructor(options: RedlockProviderOptions) {
    super(options, 200); // per instance: a slow instance counts as a no
    if (!Array.isArray(options.instances) || options.instances.length < 3) {
      throw new InvalidArgumentError('instances', 'Redlock needs at least 3 independent Redis instances');
    }
    this.prefix = validatePrefix(options.prefix ?? 'fencekit:');
    this.quorum = Math.floor(options.instances.length / 2) + 1;
    this.#maxPollMs = options.maxPollMs ?? 200;
    this.#waiterTtlMs = Math.max(5 * this.#maxPollMs, 2_000);
    const common: RedisOptions = {
      commandTimeout: this.callTimeoutMs,
      maxRetriesPerRequest: 0,
      retryStrategy: (times) => Math.min(times * 50, 1_000),
    };
    this.instances = options.instances.map((target) => {
      if (typeof target === 'object' && typeof (target as Redis).defineCommand === 'function') {
        return target as Redis; // an ioredis client of the app's (maybe another copy of ioredis)
      }
      if (isNodeRedisClient(target)) return asIoredis(target, this.callTimeoutMs);
      const url = typeof target === 'string' ? target : undefined;
      const tls = redisTls(options.tls, url);
      const own = { ...common, ...(tls ? { tls } : {}) };
      const redis = guardSockets(
        url !== undefined ? new Redis(url, own) : new Redis({ ...own, ...(target as RedisOptions) }),
      );
      this.#owned.add(redis);
      return redis;
    });
    for (const redis of this.instances) redis.on('error', () => undefined);
    this.#scripts = this.instances.map((redis) => new LockScripts(redis));
    this.#reachability = this.instances.map(
      (redis, i) => new Reachability(redis, `redlock instance ${i}`, 'redlock'),
    );
    let connected = 0;
    for (const reachability of this.#reachability)
      reachability.onceConnected(() => {
        if (++connected === this.quorum) this.noteReached();
      });
  }

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key, 'key', { allowReserved: true }); // reads only: reaches no semaphore's nodes
    this.assertOpen();
    const { holder, waiters } = await this.#read(key);
    if (!holder) return waiters === 0 ? null : { key, holder: null, waiters };
    return { key, holder: holder.info, waiters };
  }

  /**
   * What a majority says: the holder is the grant that holds the key on a majority (leftovers of
   * others may sit on a minority). Its token is the largest of its keys: each granting instance's
   * key carries the grant's token once the fence was raised there, and any two majorities share an
   * instance.
   */
  async #read(
    key: string,
  ): Promise<{ holder: { ownerToken: string; info: HolderInfo } | null; waiters: number }> {
    const answers = await this.#onAll((r) => r.inspect(lockKeys(this.prefix, key)));
    const live = answers.filter((a): a is { ok: true; value: InspectAnswer } => a.ok);
    if (live.length < this.quorum)
      throw this.#noMajority(
        answers,
        `redlock: only ${live.length} of ${this.instances.length} instances answered`,
      );
    const waiters = Math.max(0, ...live.map((a) => a.value[4]));
    const byGrant = new Map<string, InspectAnswer[]>();
    for (const { value } of live) {
      if (!(value[0] > 0 && value[1] !== null && value[5] !== null)) continue;
      byGrant.set(value[5], [...(byGrant.get(value[5]) ?? []), value]);
    }
    const held = [...byGrant.entries()].find(([, values]) => values.length >= this.quorum);
    if (!held) return { holder: null, waiters };
    const [ownerToken, values] = held;
    const tokens = values.map((value) => BigInt(value[1] as string));
    const [pttl, , owner, since] = values[0] as InspectAnswer;
    const info = {
      owner: owner || undefined,
      fencingToken: largest(tokens),
      since: since ? new Date(Number(since)) : undefined,
      expiresAt: new Date(Date.now() + pttl),
    };
    return { holder: { ownerToken, info }, waiters };
  }

  /**
   * Reads the holder on a majority, then removes that grant (guarded by its ownerToken, so never a
   * later one) on every instance. Its holder learns 'revoked' at its next renewal, refused by a
   * majority. Instances that do not answer keep its key until the TTL.
   */
  protected async removeGrant(key: string, expected: bigint | undefined): Promise<HolderInfo | null> {
    const { holder } = await this.#read(key);
    if (!holder || (expected !== undefined && holder.info.fencingToken !== expected)) return null;
    const keys = lockKeys(this.prefix, key);
    const guard = { holder: holder.ownerToken, token: '' };
    const removed = await this.#onAll((r) => r.forceRelease(keys, guard, false));
    if (removed.filter((a) => a.ok).length < this.quorum) {
      throw this.#noMajority(removed, 'redlock: force-release reached fewer than a majority');
    }
    return removed.some((a) => a.ok && a.value !== null) ? holder.info : null;
  }

  /** Names whose lock key exists on a majority of the instances (SCAN on each). */
  protected async heldNames(prefix: string): Promise<string[]> {
    const perInstance = await this.#onAll((_, i) =>
      heldNamesScan({
        nodes: [this.instances[i] as Redis],
        keyPrefix: this.prefix,
        namePrefix: prefix,
        call: (what, run) => this.#bounded(i, what, run),
      }),
    );
    const answered = perInstance.filter((a): a is { ok: true; value: string[] } => a.ok);
    if (answered.length < this.quorum) {
      throw this.#noMajority(
        perInstance,
        `redlock: only ${answered.length} of ${this.instances.length} instances answered list`,
      );
    }
    const counts = new Map<string, number>();
    for (const { value } of answered) {
      for (const name of new Set(value)) counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    return [...counts].filter(([, count]) => count >= this.quorum).map(([name]) => name);
  }

  protected async request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const keys = lockKeys(this.prefix, req.key);
    const delays = jitteredDelays({ initialMs: 5, maxMs: this.#maxPollMs });
    try {
      for (;;) {
        const granted = await this.#attempt(req, keys, cancel);
        if (granted) return granted;
        if (!req.wait) return null;
        await sleepUnlessWoken(delays.next().value, cancel).done;
      }
    } catch (error) {
      // Aborted or failed with attempts maybe still in flight: leave every queue and give back
      // whatever was granted, guarded by ownerToken and retried until done.
      this.#cleanUp(
        keys,
        req.ownerToken,
        this.#scripts.map(() => true),
      );
      throw error;
    }
  }

  /**
   * Hands the guarded LEAVE (leave the queue, give back our grant) on the instances marked in
   * `where` to the leftovers: tried now, retried until each instance has answered.
   */
  #cleanUp(keys: LockKeys, ownerToken: string, where: boolean[]): void {
    this.#scripts.forEach((scripts, i) => {
      if (!where[i]) return;
      this.#leftovers.add(`${i} ${ownerToken}`, () =>
        this.#bounded(i, 'leave', () => scripts.leave(keys, ownerToken, false)),
      );
    });
  }

  /** One round: a majority within the validity time, then the fence raise; else give back what we got. */
  async #attempt(req: LockRequest, keys: LockKeys, cancel: AbortSignal): Promise<OwnedLock | null> {
    // This round (same ownerToken) supersedes the clean-ups of the rounds or requests before it: a
    // clean-up already sent runs first (one connection per instance keeps the order), a retry of
    // one would delete this round's grant.
    for (let i = 0; i < this.#scripts.length; i++) this.#leftovers.forget(`${i} ${req.ownerToken}`);
    const sentAt = monotonicNow();
    const answers = await this.#onAll(
      (r) =>
        r.acquire(keys, {
          ownerToken: req.ownerToken,
          ttlMs: req.ttlMs,
          owner: req.owner ?? '',
          wait: req.wait,
          fair: false,
          waiterTtlMs: this.#waiterTtlMs,
          channel: '', // Redlock waiters poll
        }),
      cancel,
    );
    const tokens = answers.flatMap((a) => (a.ok && typeof a.value === 'string' ? [BigInt(a.value)] : []));
    const answered = answers.filter((a) => a.ok).length;
    // Wherever we were granted, or the outcome is unknown (no answer in time: the script may still
    // run), the grant must be given back unless this round ends in a lock.
    const giveBack = () =>
      this.#cleanUp(
        keys,
        req.ownerToken,
        answers.map((a) => !a.ok || typeof a.value === 'string'),
      );
    if (answered < this.quorum) {
      giveBack();
      throw this.#noMajority(
        answers,
        `redlock: only ${answered} of ${this.instances.length} instances answered; a grant needs ${this.quorum}`,
      );
    }
    const elapsed = monotonicNow() - sentAt;
    const validity = req.ttlMs * (1 - this.driftRate) - elapsed - 2;
    if (tokens.length >= this.quorum && validity > 0) {
      const token = largest(tokens);
      const raised = await this.#onAll(
        (r, i) =>
          (answers[i] as Outcome<AcquireAnswer>).ok &&
          typeof (answers[i] as { value: AcquireAnswer }).value === 'string'
            ? r.raiseFence(keys, token, req.ownerToken)
            : Promise.reject(new Error('not granted here')),
        cancel,
      );
      if (raised.filter((a) => a.ok).length >= this.quorum) return this.#grant(req, keys, token, sentAt);
    }
    giveBack();
    return null;
  }

  #grant(req: LockRequest, keys: LockKeys, token: bigint, sentAt: number): OwnedLock {
    const lock = leasedLock({
      key: req.key,
      fencingToken: token,
      ownerToken: req.ownerToken,
      releaseOnBackend: async () => {
        const released = await this.#onAll((r) => r.release(keys, req.ownerToken, false));
        // Instances that did not answer keep our key until its TTL unless someone retries.
        this.#cleanUp(
          keys,
          req.ownerToken,
          released.map((a) => !a.ok),
        );
        if (released.filter((a) => a.ok).length < this.quorum) {
          throw this.#noMajority(
            released,
            'redlock: release reached fewer than a majority; the rest expire with their TTL',
          );
        }
      },
      ttlMs: req.ttlMs,
      driftRate: this.driftRate,
      grantedSentAt: sentAt,
      renew: async () => {
        const answers = await this.#onAll((r) => r.renew(keys, req.ownerToken, req.ttlMs));
        const renewed = answers.filter((a) => a.ok && a.value === true).length;
        if (renewed >= this.quorum) return true;
        const refused = answers.filter((a) => a.ok && a.value !== true);
        if (refused.length > this.instances.length - this.quorum) {
          // A majority is no longer ours; an operator's marker on any of them says why.
          return refused.some((a) => a.ok && a.value === 'revoked') ? 'revoked' : false;
        }
        throw this.#noMajority(answers, 'redlock: renewal reached fewer than a majority');
      },
    });
    this.#renewing.add(lock);
    lock.onEnd(() => this.#renewing.delete(lock));
    return lock;
  }

  /** A wait that ran out while no majority was connected is an outage, not a timeout. */
  protected override backendReachable(): boolean {
    return this.#reachability.filter((r) => r.connected).length >= this.quorum;
  }

  /** One call on instance i, within callTimeoutMs (and cancel); at once a failure if it is unreachable. */
  #bounded<T>(i: number, what: string, run: () => Promise<T>, cancel?: AbortSignal): Promise<T> {
    try {
      this.#reachability[i]?.check(what);
    } catch (error) {
      return Promise.reject(error);
    }
    const reachability = this.#reachability[i];
    return boundedCall(`redlock instance ${i}`, what, run, this.callTimeoutMs, cancel, reachability);
  }

  /**
   * Runs call on every instance at once, each bounded; each answer or failure, in instance order.
   * Rejects with cancel.reason as soon as cancel aborts.
   */
  /**
   * The error for outcomes without a majority: AuthenticationError when so many instances refused
   * who we are that no majority can answer (retrying cannot help), else BackendUnavailableError.
   */
  #noMajority(outcomes: Array<Outcome<unknown>>, message: string): Error {
    const refusals = outcomes.flatMap((o) =>
      !o.ok && o.error instanceof AuthenticationError ? [o.error] : [],
    );
    if (refusals.length > this.instances.length - this.quorum) return refusals[0] as AuthenticationError;
    return new BackendUnavailableError(message);
  }

  async #onAll<T>(
    call: (scripts: LockScripts, index: number) => Promise<T>,
    cancel?: AbortSignal,
  ): Promise<Array<Outcome<T>>> {
    const outcomes = await Promise.all(
      this.#scripts.map((scripts, i) =>
        this.#bounded(i, 'call', () => call(scripts, i), cancel).then(
          (value): Outcome<T> => ({ ok: true, value }),
          (error: unknown): Outcome<T> => ({ ok: false, error }),
        ),
      ),
    );
    if (cancel?.aborted) throw cancel.reason;
    // Reached: from now on the base rides a waiting acquire through outages.
    if (outcomes.filter((o) => o.ok).length >= this.quorum) this.noteReached();
    return outcomes;
  }

  protected async shutdown(): Promise<void> {
    // Bounded (within the base's 1 s for shutdown): one more try at the leftovers, then QUIT;
    // whatever is not done by then is cut.
    await withinGrace(
      (async () => {
        await this.#leftovers.flush();
        await Promise.all([...this.#owned].map((r) => r.quit().catch(() => undefined)));
      })(),
      Math.min(this.callTimeoutMs, SHUTDOWN_MS),
    );
    this.#leftovers.close();
    for (const redis of this.#owned) redis.disconnect();
  }

  /** For tests of holder death: stop renewing and drop every connection without releasing. */
  async abandon(): Promise<void> {
    for (const lock of this.#renewing) lock.lose('closed');
    this.#leftovers.close();
    for (const redis of this.instances) redis.disconnect();
  }
}

/** Math.max for bigints. */
function largest(values: bigint[]): bigint {
  let max = values[0] ?? 0n;
  for (const value of values) if (value > max) max = value;
  return max;
}
