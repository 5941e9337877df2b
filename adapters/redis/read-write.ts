import type { Cluster, Redis } from 'ioredis';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterReadWriteInfo, ReadWriteAdapter, ReadWriteRequest } from '../../src/read-write/core.js';
import type { HolderInfo } from '../../src/types.js';
import { type QueuedGrantClient, requestQueuedGrant } from './queued-grant.js';
import { ReadWriteScripts, readWriteKeys } from './read-write-scripts.js';
import { delayEnd } from './recipe-delay.js';

/** What a Redis read-write lock borrows from its provider: connection, notices, clean-up owner. */
export interface RedisReadWriteClient extends QueuedGrantClient {
  redis: Redis | Cluster;
  prefix: string;
  reachable(): boolean;
}

/**
 * A read-write lock on one Redis: readers and the writer in two ZSETs scored by lease expiry from
 * the server's TIME, one FIFO queue of readers and writers, and one script per step
 * (read-write-scripts.ts). A release grants the head of the queue in its own script (every reader
 * up to the next writer, or that writer alone) and tells each waiter on its provider's channel, as
 * the semaphore does; the request loop is the semaphore's (queued-grant.ts). Tokens come from one
 * INCR counter per name, taken at grant time, so a writer's token exceeds every earlier grant's.
 */
export class RedisReadWriteAdapter implements ReadWriteAdapter {
  readonly #keys: string[];
  readonly #client: RedisReadWriteClient;
  readonly #scripts: ReadWriteScripts;
  /** A lost write keeps out everybody, a lost read writers, for its delay by the server's clock. */
  readonly keepsLockDelay = true;

  constructor(name: string, client: RedisReadWriteClient) {
    this.#keys = readWriteKeys(client.prefix, name);
    this.#client = client;
    this.#scripts = new ReadWriteScripts(client.redis);
  }

  reachable(): boolean {
    return this.#client.reachable();
  }

  async inspect(signal: AbortSignal): Promise<AdapterReadWriteInfo> {
    const [waiters, holders, delays = []] = await this.#client.call(
      'read-write inspect',
      () => this.#scripts.inspect(this.#keys),
      signal,
    );
    const delayed = delays.flatMap(([mode, end]) => {
      const delayedUntil = delayEnd(end);
      return delayedUntil && (mode === 'read' || mode === 'write') ? [{ mode, delayedUntil }] : [];
    });
    const info: AdapterReadWriteInfo = { writer: null, readers: [], waiters, delayed };
    const sorted = [...holders].sort(([, a], [, b]) => (BigInt(a) < BigInt(b) ? -1 : 1));
    for (const [mode, token, since, owner, expiry] of sorted) {
      const holder: HolderInfo = {
        owner: owner === '' ? undefined : owner,
        fencingToken: BigInt(token),
        since: new Date(Number(since)),
        // The server's clock: shown as it is, never used for a decision here.
        expiresAt: new Date(Number(expiry)),
      };
      if (mode === 'write') info.writer = holder;
      else info.readers.push(holder);
    }
    return info;
  }

  request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const keys = this.#keys;
    const scripts = this.#scripts;
    const { call, waiterTtlMs } = this.#client;
    const args = { ...req, owner: req.owner ?? '', waiterTtlMs };
    return requestQueuedGrant(
      this.#client,
      req,
      {
        label: 'read-write',
        acquire: (channel, signal) =>
          call('read-write acquire', () => scripts.acquire(keys, { ...args, channel }), signal),
        release: () => scripts.release(keys, req.ownerToken),
        renew: () => scripts.renew(keys, req.ownerToken, req.ttlMs),
      },
      cancel,
    );
  }
}
