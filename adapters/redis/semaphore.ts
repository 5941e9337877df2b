import type { Cluster, Redis } from 'ioredis';
import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { monotonicNow } from '../../src/clock.js';
import { leasedLock } from '../../src/lease-renewal.js';
import type { OwnedLock } from '../../src/ownership.js';
import {
  GenericSemaphore,
  type PermitRequest,
  type SemaphoreAdapter,
  type SemaphoreContext,
} from '../../src/semaphore/core.js';
import { SemaphoreLimitMismatchError } from '../../src/semaphore/errors.js';
import type { Semaphore, SemaphoreInfo, SemaphoreOptions } from '../../src/semaphore/types.js';
import { boundedCall, wasNotSent } from './bounded-call.js';
import { extendHanded, type HandedGrant, WaiterInbox } from './hand-over.js';
import type { Leftovers } from './leftovers.js';
import type { WaiterNotices } from './notices.js';
import { type SemAcquireAnswer, SemaphoreScripts, semaphoreKeys } from './semaphore-scripts.js';

/** What a Redis semaphore borrows from its provider: connection, notices, clean-up owner. */
export interface RedisSemaphoreClient {
  redis: Redis | Cluster;
  prefix: string;
  driftRate: number;
  notices: WaiterNotices;
  leftovers: Leftovers;
  maxPollMs: number;
  waiterTtlMs: number;
  callTimeoutMs: number;
  /** One command with the provider's deadline (callTimeoutMs) and the request's cancel signal. */
  call<T>(what: string, run: () => Promise<T>, cancel?: AbortSignal): Promise<T>;
  reachable(): boolean;
  /** Counts a notice that woke a waiter. */
  woken(): void;
}

/**
 * A semaphore on one Redis: a ZSET of permits scored by lease expiry from the server's TIME, one
 * script that drops expired leases, counts, and grants at the head of a FIFO queue (or queues us);
 * a watchdog renews with ZADD XX every ttl/3; release ZREMs and, in the same script, grants the
 * first waiters whose permits now fit and tells them on their provider's pub/sub channel (one
 * round trip and one message per hand-over). Waiters poll only for leases that expire without a
 * release (a dead holder), sleeping until the soonest expiry, at most maxPollMs.
 */
export function redisSemaphore(
  name: string,
  options: SemaphoreOptions,
  ctx: SemaphoreContext,
  client: RedisSemaphoreClient,
): Semaphore {
  return new GenericSemaphore(name, options, ctx, new RedisSemaphoreAdapter(name, client));
}

class RedisSemaphoreAdapter implements SemaphoreAdapter {
  readonly #keys: string[];
  readonly #client: RedisSemaphoreClient;
  readonly #scripts: SemaphoreScripts;

  constructor(name: string, client: RedisSemaphoreClient) {
    this.#keys = semaphoreKeys(client.prefix, name);
    this.#client = client;
    this.#scripts = new SemaphoreScripts(client.redis);
  }

  reachable(): boolean {
    return this.#client.reachable();
  }

  async inspect(signal: AbortSignal): Promise<Omit<SemaphoreInfo, 'name' | 'limit'>> {
    const [waiters, holders] = await this.#client.call(
      'semaphore inspect',
      () => this.#scripts.inspect(this.#keys),
      signal,
    );
    return {
      waiters,
      holders: holders
        .map(([permits, token, since, owner, expiry]) => ({
          owner: owner === '' ? undefined : owner,
          fencingToken: BigInt(token),
          since: new Date(Number(since)),
          // The server's clock: shown as it is, never used for a decision here.
          ...(expiry === '0' ? {} : { expiresAt: new Date(Number(expiry)) }),
          permits: Number(permits),
        }))
        .sort((a, b) => (a.fencingToken < b.fencingToken ? -1 : 1)),
    };
  }

  async request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const { leftovers } = this.#client;
    // A retry with this ownerToken supersedes the clean-up of the failed try before it, until it
    // fails: then the clean-up is owed again, also when this try sent nothing.
    const owed = leftovers.forget(req.ownerToken);
    let sent = false;
    const attempt = (): Promise<SemAcquireAnswer> =>
      this.#client
        .call(
          'semaphore acquire',
          () =>
            this.#scripts.acquire(
              this.#keys,
              { ...req, owner: req.owner ?? '' },
              this.#client.waiterTtlMs,
              req.wait ? this.#client.notices.channel : '',
            ),
          cancel,
        )
        .then(
          (answer) => {
            sent = true;
            if (Array.isArray(answer) && answer[0] === 'limit') {
              throw new SemaphoreLimitMismatchError(req.name, req.limit, Number(answer[1]));
            }
            return answer;
          },
          (error: unknown) => {
            sent ||= !wasNotSent(error);
            throw error;
          },
        );
    try {
      const sentAt = monotonicNow();
      const answer = await attempt();
      if (typeof answer === 'string') return this.#grant(req, BigInt(answer), sentAt);
      if (!req.wait) return null;
      return await this.#wait(req, answer as [number, string], sentAt, attempt, cancel);
    } catch (error) {
      // Outcome unknown (timed out, aborted): leave the queue and give back a grant made meanwhile.
      // The provider's leftovers own that clean-up and retry it until Redis answers.
      if (sent || owed) {
        leftovers.add(req.ownerToken, () =>
          this.#client.call('semaphore leave', () =>
            this.#scripts.release(this.#keys, req.ownerToken, req.limit),
          ),
        );
      }
      throw error;
    }
  }

  /**
   * Queued: a release grants us our permits in its script and says so on our channel ("ownerToken
   * token"), which we take without another call; we poll only for leases that expire without a
   * release (a dead holder), sleeping until the soonest expiry, at most maxPollMs. A poll also
   * finds a grant whose notice was lost.
   */
  async #wait(
    req: PermitRequest,
    firstRefusal: [number, string],
    firstSentAt: number,
    attempt: () => Promise<SemAcquireAnswer>,
    cancel: AbortSignal,
  ): Promise<OwnedLock> {
    const { notices, maxPollMs } = this.#client;
    const inbox = new WaiterInbox(req.ownerToken, true);
    inbox.refused(firstSentAt, BigInt(firstRefusal[1]));
    let untilExpiry = -firstRefusal[0];
    // Not subscribed yet: a notice sent before the subscription is lost, so look once more at once.
    let again = !notices.subscribed;
    let wake: () => void = () => undefined;
    const listening = notices.listen(req.ownerToken, (message) => {
      if (!inbox.notice(message)) return;
      this.#client.woken();
      wake();
    });
    // A handed grant lasts at least until our place in the queue would have lapsed (the release
    // script caps it there, so that a dead waiter holds no permit longer): until then we extend it.
    const provisionalMs = Math.min(req.ttlMs, this.#client.waiterTtlMs);
    const takeHanded = (): OwnedLock | undefined => {
      // Taken while half of the provisional lease is left (extended at once past its third): a
      // waiter whose last poll is older would otherwise need a round trip more than one whose is
      // recent, and could be seen granted after a waiter queued behind it.
      const handed = inbox.handed(provisionalMs, provisionalMs / 2);
      return handed && this.#adoptHanded(req, handed, provisionalMs);
    };
    try {
      // Best effort: without notices the waiter still polls, so it waits for the subscription no
      // longer than one poll (a grant it cannot hear must be found by a poll before it lapses).
      // Already subscribed (every wait but a provider's first): no timer, no await.
      if (!notices.subscribed) {
        const subscribeMs = Math.min(this.#client.callTimeoutMs, maxPollMs);
        await boundedCall('redis', 'subscribe', () => listening.subscribed, subscribeMs, cancel).catch(
          () => undefined,
        );
      }
      const delays = jitteredDelays({ initialMs: maxPollMs / 2, maxMs: maxPollMs });
      for (;;) {
        if (cancel.aborted) throw cancel.reason;
        const taken = takeHanded();
        if (taken) return taken;
        // A notice that came while an attempt was in flight makes the next attempt start at once.
        if (!again && !inbox.noticed) {
          const sleep = sleepUnlessWoken(Math.min(Math.max(untilExpiry, 5), delays.next().value), cancel);
          wake = sleep.wake;
          await sleep.done;
          const handedMeanwhile = takeHanded();
          if (handedMeanwhile) return handedMeanwhile;
        }
        again = false;
        inbox.noticed = false;
        const sentAt = monotonicNow();
        const answer = await attempt();
        if (typeof answer === 'string') return this.#grant(req, BigInt(answer), sentAt);
        untilExpiry = -(answer[0] as number);
        inbox.refused(sentAt, BigInt(answer[1]));
      }
    } finally {
      listening.stop();
    }
  }

  #adoptHanded(req: PermitRequest, handed: HandedGrant, provisionalMs: number): OwnedLock {
    return extendHanded(this.#grant(req, handed.token, handed.sentAt, handed.rttMs), handed, {
      provisionalMs,
      ttlMs: req.ttlMs,
      driftRate: this.#client.driftRate,
      renew: () => this.#renew(req),
    });
  }

  #renew(req: PermitRequest): Promise<boolean> {
    return this.#client.call('semaphore renew', () =>
      this.#scripts.renew(this.#keys, req.ownerToken, req.ttlMs),
    );
  }

  #grant(req: PermitRequest, token: bigint, sentAt: number, rttMs?: number): OwnedLock {
    const { call, leftovers } = this.#client;
    return leasedLock({
      key: req.name,
      fencingToken: token,
      ownerToken: req.ownerToken,
      releaseOnBackend: async () => {
        const release = () =>
          call('semaphore release', () => this.#scripts.release(this.#keys, req.ownerToken, req.limit));
        await release().catch((error: unknown) => {
          leftovers.add(req.ownerToken, release); // guarded by ownerToken: retried until Redis answers
          throw error;
        });
      },
      ttlMs: req.ttlMs,
      driftRate: this.#client.driftRate,
      grantedSentAt: sentAt,
      ...(rttMs === undefined ? {} : { grantedRttMs: rttMs }),
      renew: () => this.#renew(req),
    });
  }
}
