import { monotonicNow } from '../clock.js';
import { leasedLock } from '../lease-renewal.js';
import type { OwnedLock } from '../ownership.js';
import type { PermitRequest, SemaphoreAdapter } from '../semaphore/core.js';
import { awaitGrant } from './queue-place.js';
import { type MemoryPermitLease, type MemorySemaphoreServer, semaphoreServerOf } from './semaphore-server.js';
import type { MemoryLockServer } from './server.js';

export interface MemorySemaphoreClient {
  server: MemoryLockServer;
  clientId: number;
  driftRate: number;
}

/**
 * A semaphore of the embedded provider: one client of the in-process semaphore server. Requests of
 * one name to that server (the semaphores', or the read-write locks').
 */
export class MemorySemaphoreAdapter implements SemaphoreAdapter {
  readonly keepsLockDelay = true;
  readonly #name: string;
  readonly #server: MemorySemaphoreServer;
  readonly #client: MemorySemaphoreClient;

  constructor(name: string, client: MemorySemaphoreClient, server = semaphoreServerOf(client.server)) {
    this.#name = name;
    this.#client = client;
    this.#server = server;
  }

  /** In process: reached from the start (a partition is an outage, ridden through). */
  reached(): boolean {
    return true;
  }

  async inspect(): Promise<ReturnType<MemorySemaphoreServer['inspect']>> {
    return this.#server.inspect(this.#name);
  }

  async request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const sentAt = monotonicNow();
    const serverRequest = { clientId: this.#client.clientId, ...req };
    if (!req.wait) {
      const lease = this.#server.tryGrant(serverRequest);
      return lease && this.#adopt(lease, sentAt);
    }
    const place = this.#server.enqueue(serverRequest);
    // Granted while cancelling: the permits go straight back, nothing is left behind.
    const lease = await awaitGrant(place, cancel, (raced) =>
      this.#server.release(this.#client.clientId, raced.name, raced.ownerToken),
    );
    // A waiter's lease began when the server granted it; the wait itself does not shorten it.
    return this.#adopt(lease, lease.grantedAt);
  }

  #adopt(lease: MemoryPermitLease, sentAt: number): OwnedLock {
    const { clientId } = this.#client;
    return leasedLock({
      key: lease.name,
      fencingToken: lease.fencingToken,
      ownerToken: lease.ownerToken,
      releaseOnBackend: async () => {
        this.#server.release(clientId, lease.name, lease.ownerToken);
      },
      ttlMs: lease.ttlMs,
      driftRate: this.#client.driftRate,
      grantedSentAt: sentAt,
      renew: async () => this.#server.renew(clientId, lease.name, lease.ownerToken),
    });
  }
}
