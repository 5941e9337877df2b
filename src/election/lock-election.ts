import { NotImplementedError } from '../errors.js';
import type { OwnedLock } from '../ownership.js';
import type { LockProvider } from '../types.js';
import { validateKey } from '../validate.js';
import { leadershipOf } from './leadership.js';
import type { CampaignOptions, Election, LeaderInfo, Leadership } from './types.js';

/** Options of `createElection` and of the election `runAsLeader` makes. */
export interface LockElectionOptions {
  /** Lease of a leader's lock where the backend has per-lock leases (memory, Redis). */
  ttlMs?: number;
  /** How often observe() looks at the lock (these backends have no watch). Default 250 ms. */
  pollMs?: number;
}

/**
 * Election over any provider without a native one (memory, Redis, PostgreSQL): a campaign is a
 * blocking acquire of the election's lock with the proposal as owner text, the term is the lock's
 * fencing token, leader() is inspect(), and observe() polls it.
 */
export class LockElection implements Election {
  readonly #pollMs: number;

  constructor(
    readonly provider: LockProvider,
    readonly name: string,
    readonly options: LockElectionOptions = {},
  ) {
    validateKey(name, 'election name');
    this.#pollMs = options.pollMs ?? 250;
  }

  async campaign(value: string, opts: CampaignOptions = {}): Promise<Leadership> {
    const lock = (await this.provider.acquire(this.name, {
      owner: value,
      ...(this.options.ttlMs === undefined ? {} : { ttlMs: this.options.ttlMs }),
      ...(opts.waitMs === undefined ? {} : { waitMs: opts.waitMs }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
      ...(opts.lockDelayMs === undefined ? {} : { lockDelayMs: opts.lockDelayMs }),
    })) as OwnedLock;
    return leadershipOf(this.name, lock, async () => {
      throw new NotImplementedError(
        `proclaim on the ${this.provider.backend} backend (etcd and ZooKeeper have it)`,
      );
    });
  }

  async leader(): Promise<LeaderInfo | null> {
    const info = await this.provider.inspect(this.name);
    return info?.holder ? { value: info.holder.owner ?? '', term: info.holder.fencingToken } : null;
  }

  async *observe(opts: { signal?: AbortSignal } = {}): AsyncIterable<LeaderInfo | null> {
    let last: LeaderInfo | null | undefined;
    while (!opts.signal?.aborted) {
      const leader = await this.leader();
      if (last === undefined || last?.term !== leader?.term || last?.value !== leader?.value) {
        last = leader;
        yield leader;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.#pollMs);
        function done() {
          clearTimeout(timer);
          opts.signal?.removeEventListener('abort', done);
          resolve();
        }
        opts.signal?.addEventListener('abort', done, { once: true });
      });
    }
  }
}

/** The provider's native election where it has one (etcd, ZooKeeper), else one over its locks. */
export function createElection(
  provider: LockProvider,
  name: string,
  options: LockElectionOptions = {},
): Election {
  const native = (provider as { election?: (name: string) => Election }).election;
  return typeof native === 'function'
    ? native.call(provider, name)
    : new LockElection(provider, name, options);
}
