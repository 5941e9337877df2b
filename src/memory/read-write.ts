import type { OwnedLock } from '../ownership.js';
import type { AdapterReadWriteInfo, ReadWriteAdapter, ReadWriteRequest } from '../read-write/core.js';
import { MemorySemaphoreAdapter, type MemorySemaphoreClient } from './semaphore.js';
import { readWriteServerOf } from './semaphore-server.js';

/**
 * Every read-write lock is a semaphore of ALL permits on a server of their own: a read takes one,
 * the write takes them all. That server's queue is strict FIFO (a waiter for every permit is not
 * overtaken by later waiters for one), so a waiting writer blocks the readers who ask after it, and
 * its one counter gives a writer a token greater than every earlier grant's.
 */
const ALL = Number.MAX_SAFE_INTEGER;

/** The read-write locks of the embedded provider. */
export class MemoryReadWriteAdapter implements ReadWriteAdapter {
  readonly keepsLockDelay = true;
  readonly #permits: MemorySemaphoreAdapter;

  constructor(name: string, client: MemorySemaphoreClient) {
    this.#permits = new MemorySemaphoreAdapter(name, client, readWriteServerOf(client.server));
  }

  reached(): boolean {
    return this.#permits.reached();
  }

  request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const { mode, ...rest } = req;
    return this.#permits.request({ ...rest, limit: ALL, permits: mode === 'read' ? 1 : ALL }, cancel);
  }

  async inspect(): Promise<AdapterReadWriteInfo> {
    const { holders, waiters, delayed } = await this.#permits.inspect();
    const grants = holders.map(({ permits, ...holder }) => ({ permits, holder }));
    return {
      writer: grants.find((grant) => grant.permits === ALL)?.holder ?? null,
      readers: grants.filter((grant) => grant.permits !== ALL).map((grant) => grant.holder),
      waiters,
      delayed: delayed.map(({ permits, delayedUntil }) => ({
        mode: permits === ALL ? ('write' as const) : ('read' as const),
        delayedUntil,
      })),
    };
  }
}
