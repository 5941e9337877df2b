import type { Cluster, Redis } from 'ioredis';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterSemaphoreInfo, PermitRequest, SemaphoreAdapter } from '../../src/semaphore/core.js';
import { SemaphoreLimitMismatchError } from '../../src/semaphore/errors.js';
import { type QueuedGrantClient, type QueuedRefusal, requestQueuedGrant } from './queued-grant.js';
import { delayEnd } from './recipe-delay.js';
import { SemaphoreScripts, semaphoreKeys } from './semaphore-scripts.js';

/** What a Redis semaphore borrows from its provider: connection, notices, clean-up owner. */
export interface RedisSemaphoreClient extends QueuedGrantClient {
  redis: Redis | Cluster;
  prefix: string;
  reachable(): boolean;
}

/**
 * A semaphore on one Redis: a ZSET of permits scored by lease expiry from the server's TIME, one
 * script that drops expired leases, counts, and grants at the head of a FIFO queue (or queues us);
 * a watchdog renews with ZADD XX every ttl/3; release ZREMs and, in the same script, grants the
 * first waiters whose permits now fit and tells them on their provider's pub/sub channel (one
 * round trip and one message per hand-over). Waiters poll only for leases that expire without a
 * release (a dead holder), sleeping until the soonest expiry, at most maxPollMs.
 */
export class RedisSemaphoreAdapter implements SemaphoreAdapter {
  readonly #keys: string[];
  readonly #client: RedisSemaphoreClient;
  readonly #scripts: SemaphoreScripts;
  /** A lost grant's permits stay taken for its delay, by the server's clock (semaphore-scripts.ts). */
  readonly keepsLockDelay = true;

  constructor(name: string, client: RedisSemaphoreClient) {
    this.#keys = semaphoreKeys(client.prefix, name);
    this.#client = client;
    this.#scripts = new SemaphoreScripts(client.redis);
  }

  reachable(): boolean {
    return this.#client.reachable();
  }

  async inspect(signal: AbortSignal): Promise<AdapterSemaphoreInfo> {
    const [waiters, holders, delayed = []] = await this.#client.call(
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
      delayed: delayed.flatMap(([permits, end]) => {
        const delayedUntil = delayEnd(end);
        return delayedUntil ? [{ permits: Number(permits), delayedUntil }] : [];
      }),
    };
  }

  request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const keys = this.#keys;
    const scripts = this.#scripts;
    const { waiterTtlMs, call } = this.#client;
    return requestQueuedGrant(
      this.#client,
      req,
      {
        label: 'semaphore',
        acquire: async (channel, cancel) => {
          const answer = await call(
            'semaphore acquire',
            () => scripts.acquire(keys, { ...req, owner: req.owner ?? '' }, waiterTtlMs, channel),
            cancel,
          );
          if (Array.isArray(answer) && answer[0] === 'limit') {
            throw new SemaphoreLimitMismatchError(req.name, req.limit, Number(answer[1]));
          }
          return answer as string | QueuedRefusal;
        },
        release: () => scripts.release(keys, req.ownerToken, req.limit),
        renew: () => scripts.renew(keys, req.ownerToken, req.ttlMs),
      },
      cancel,
    );
  }
}
