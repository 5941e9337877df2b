import { type Etcd3, type IKeyValue, SortOrder, SortTarget } from 'etcd3';
import { leadershipOf } from '../../src/election/leadership.js';
import type { CampaignOptions, Election, LeaderInfo, Leadership } from '../../src/election/types.js';
import type { OwnedLock } from '../../src/ownership.js';
import { validateKey } from '../../src/validate.js';
import { namePrefix, prefixEnd } from './keys.js';
import { unavailable } from './mutex.js';

/** What the election needs from the provider that runs it. */
export interface ElectionHost {
  readonly client: Etcd3;
  readonly namespace: string;
  readonly callTimeoutMs: number;
  campaignLock(name: string, value: string, opts: CampaignOptions): Promise<OwnedLock>;
  /** Puts value on the lock's key only while the lock is held; false if it is not. */
  putIfHeld(lock: OwnedLock, value: string): Promise<boolean>;
}

/**
 * etcd's election, laid out as `etcdctl elect`: a candidate is the key `<name>/<lease hex>` with its
 * proposal as value, the leader is the smallest create revision. A campaign is the lock's wait, so
 * it is FIFO and wakes one candidate per resignation.
 */
export class EtcdElection implements Election {
  constructor(
    readonly host: ElectionHost,
    readonly name: string,
  ) {
    validateKey(name, 'election name');
  }

  async campaign(value: string, opts: CampaignOptions = {}): Promise<Leadership> {
    const lock = await this.host.campaignLock(this.name, value, opts);
    return leadershipOf(this.name, lock, (next) => this.host.putIfHeld(lock, next));
  }

  async leader(): Promise<LeaderInfo | null> {
    return (await this.#first()).leader;
  }

  async *observe(opts: { signal?: AbortSignal } = {}): AsyncIterable<LeaderInfo | null> {
    const signal = opts.signal;
    const prefix = Buffer.from(namePrefix(this.host.namespace, this.name));
    let { leader, revision } = await this.#first();
    const watcher = await this.host.client
      .watch()
      .prefix(prefix)
      .startRevision((revision + 1n).toString())
      .create()
      .catch((error: unknown) => {
        throw unavailable('watch failed', error);
      });
    let wake: (() => void) | undefined;
    let changed = true;
    const notify = () => {
      changed = true;
      wake?.();
    };
    watcher.on('data', notify);
    watcher.on('error', notify);
    signal?.addEventListener('abort', notify, { once: true });
    try {
      let last: LeaderInfo | null | undefined;
      while (!signal?.aborted) {
        if (changed) {
          changed = false;
          if (last !== undefined) ({ leader } = await this.#first());
          if (last === undefined || !sameLeader(last, leader)) {
            last = leader;
            yield leader;
            continue;
          }
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          if (changed || signal?.aborted) resolve();
        });
        wake = undefined;
      }
    } finally {
      signal?.removeEventListener('abort', notify);
      await watcher.cancel().catch(() => undefined);
    }
  }

  async #first(): Promise<{ leader: LeaderInfo | null; revision: bigint }> {
    const prefix = Buffer.from(namePrefix(this.host.namespace, this.name));
    try {
      const res = await this.host.client.kv.range(
        {
          key: prefix,
          range_end: prefixEnd(prefix),
          sort_order: SortOrder.Ascend,
          sort_target: SortTarget.Create,
          limit: 1,
        },
        { deadline: new Date(Date.now() + this.host.callTimeoutMs) },
      );
      const head: IKeyValue | undefined = res.kvs[0];
      const leader = head ? { value: head.value.toString('utf8'), term: BigInt(head.create_revision) } : null;
      return { leader, revision: BigInt(res.header.revision) };
    } catch (error) {
      throw unavailable('reading the leader failed', error);
    }
  }
}

function sameLeader(a: LeaderInfo | null, b: LeaderInfo | null): boolean {
  return a === b || (a !== null && b !== null && a.term === b.term && a.value === b.value);
}
