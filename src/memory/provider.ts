import { monotonicNow } from '../clock.js';
import { leasedLock } from '../lease-renewal.js';
import type { OwnedLock } from '../ownership.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../provider-base.js';
import type { ReadWriteAdapter } from '../read-write/core.js';
import { GenericSemaphore } from '../semaphore/core.js';
import type { Semaphore, SemaphoreOptions } from '../semaphore/types.js';
import type { HolderInfo, LockInfo, QueuedWaiter } from '../types.js';
import { validateKey } from '../validate.js';
import { awaitGrant } from './queue-place.js';
import { MemoryReadWriteAdapter } from './read-write.js';
import { MemorySemaphoreAdapter } from './semaphore.js';
import { readWriteServerOf } from './semaphore-server.js';
import { type MemoryLease, MemoryLockServer } from './server.js';

const sharedServers = new Map<string, MemoryLockServer>();

/** The process-wide server behind `memory://<name>` (name '' for plain `memory://`). */
export function memoryServer(name = ''): MemoryLockServer {
  let server = sharedServers.get(name);
  if (!server) {
    server = new MemoryLockServer();
    sharedServers.set(name, server);
  }
  return server;
}

/** Options of `new MemoryLockProvider(options)`. */
export interface MemoryProviderOptions extends ProviderDefaults {
  /** The in-process server to use; default: the one shared by every `memory://` provider. */
  server?: MemoryLockServer;
}

/**
 * The embedded provider: same semantics as the network backends (leases renewed every ttl/3 that
 * really expire, FIFO, fencing tokens, early loss signal), one process only. Each provider is one
 * client of a MemoryLockServer; `simulate` injects the faults a network client can suffer.
 */
export class MemoryLockProvider extends BaseLockProvider {
  readonly backend = 'memory' as const;
  protected override readonly lockDelaySupported = true;
  readonly server: MemoryLockServer;
  readonly #clientId: number;

  constructor(options: MemoryProviderOptions = {}) {
    super(options);
    this.server = options.server ?? memoryServer();
    this.#clientId = this.server.registerClient();
    this.noteReached(); // in process: reached from the start
  }

  /** Fault injection for tests and demos. */
  readonly simulate = {
    /** The process died: nothing is renewed or released; leases expire, queued waits vanish. */
    crash: (): void => {
      this.server.partitionClient(this.#clientId, true);
      this.server.crashClient(this.#clientId);
    },
    /** Cut (true) or heal (false) this client's link to the server. */
    partition: (cut: boolean): void => this.server.partitionClient(this.#clientId, cut),
  };

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key, 'key', { allowReserved: true }); // reads only: reaches no semaphore's nodes
    this.assertOpen();
    return this.server.inspect(key);
  }

  protected async removeGrant(key: string, expected: bigint | undefined): Promise<HolderInfo | null> {
    return this.server.forceRelease(this.#clientId, key, expected);
  }

  /** The server's queue: an entry per request (the server serves every provider of the process). */
  protected override async queuedWaiters(key: string, limit: number): Promise<QueuedWaiter[]> {
    return this.server.queue(this.#clientId, key, limit);
  }

  /** Held locks and read-write locks. */
  protected async heldNames(): Promise<string[]> {
    const readWrite = readWriteServerOf(this.server).heldNames(this.#clientId);
    return [...this.server.heldNames(this.#clientId), ...readWrite];
  }

  protected async request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const sentAt = monotonicNow();
    const memoryRequest = { clientId: this.#clientId, ...req };
    if (!req.wait) {
      const lease = this.server.tryGrant(memoryRequest);
      return lease && this.#adopt(lease, sentAt);
    }
    const place = this.server.enqueue(memoryRequest);
    // Granted while cancelling: the grant goes straight back, nothing is left behind.
    const lease = await awaitGrant(place, cancel, (raced) =>
      this.server.release(this.#clientId, raced.key, raced.ownerToken),
    );
    // A waiter's lease began when the server granted it; the wait itself does not shorten it.
    return this.#adopt(lease, lease.grantedAt);
  }

  /** "At most `limit` at once" under `name`. */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    const client = { server: this.server, clientId: this.#clientId, driftRate: this.driftRate };
    const adapter = new MemorySemaphoreAdapter(name, client);
    return new GenericSemaphore(name, options, this.semaphoreContext(), adapter);
  }

  protected override readWriteAdapter(name: string): ReadWriteAdapter {
    return new MemoryReadWriteAdapter(name, {
      server: this.server,
      clientId: this.#clientId,
      driftRate: this.driftRate,
    });
  }

  protected async shutdown(): Promise<void> {}

  #adopt(lease: MemoryLease, sentAt: number): OwnedLock {
    const lock = leasedLock({
      key: lease.key,
      fencingToken: lease.fencingToken,
      ownerToken: lease.ownerToken,
      releaseOnBackend: async () => {
        this.server.release(this.#clientId, lease.key, lease.ownerToken);
      },
      ttlMs: lease.ttlMs,
      driftRate: this.driftRate,
      grantedSentAt: sentAt,
      renew: async () => this.server.renew(this.#clientId, lease.key, lease.ownerToken),
    });
    // In process, the "server" tells the holder at once (a network backend's watch, without delay).
    lock.onEnd(this.server.watchRevocation(lease.ownerToken, () => lock.lose('revoked')));
    return lock;
  }
}
