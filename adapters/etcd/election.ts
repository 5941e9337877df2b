import { type Etcd3, type IKeyValue, SortOrder, SortTarget } from 'etcd3';
import { type CampaignHost, NativeElection } from '../../src/election/native-election.js';
import type { LeaderInfo } from '../../src/election/types.js';
import type { OwnedLock } from '../../src/ownership.js';
import { bounded } from './bounded.js';
import { namePrefix, prefixEnd } from './keys.js';
import { unavailable } from './mutex.js';

/** What the election needs from the provider that runs it. */
export interface ElectionHost extends CampaignHost {
  readonly client: Etcd3;
  readonly namespace: string;
  readonly callTimeoutMs: number;
  /** Puts value on the lock's key only while the lock is held; false if it is not. */
  putIfHeld(lock: OwnedLock, value: string): Promise<boolean>;
  /** The error as the caller sees it: an AuthenticationError when etcd refused who we are. */
  refused(error: unknown): Promise<unknown>;
}

/**
 * etcd's election, laid out as `etcdctl elect`: a candidate is the key `<name>/<lease hex>` with its
 * proposal as value, the leader is the smallest create revision. A campaign is the lock's wait, so
 * it is FIFO and wakes one candidate per resignation.
 */
export class EtcdElection extends NativeElection<ElectionHost> {
  protected putIfHeld(lock: OwnedLock, value: string): Promise<boolean> {
    return this.host.putIfHeld(lock, value);
  }

  async leader(): Promise<LeaderInfo | null> {
    return (await this.#first()).leader;
  }

  /**
   * Yields the leader now and after every change. Each watch is created within callTimeoutMs and
   * abandoned at once when `signal` aborts (the iteration then ends); a watch etcd ends itself
   * (compaction) is made again from the last read. Watches are cancelled without waiting.
   */
  async *observe(opts: { signal?: AbortSignal } = {}): AsyncIterable<LeaderInfo | null> {
    const signal = opts.signal;
    const prefix = Buffer.from(namePrefix(this.host.namespace, this.name));
    let wake: (() => void) | undefined;
    let changed = true;
    const notify = () => {
      changed = true;
      wake?.();
    };
    let { leader, revision } = await this.#first();
    let watch = this.#watch(prefix, revision + 1n, notify);
    signal?.addEventListener('abort', notify, { once: true });
    try {
      if (!(await this.#created(watch, signal))) return;
      let last: LeaderInfo | null | undefined;
      while (!signal?.aborted) {
        if (changed) {
          changed = false;
          if (last !== undefined) ({ leader, revision } = await this.#first());
          if (watch.endedByServer) {
            watch = this.#watch(prefix, revision + 1n, notify);
            if (!(await this.#created(watch, signal))) return;
          }
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
      watch.stop();
    }
  }

  /** A watch on the election's keys from `fromRevision`; every event (or its end) calls notify. */
  #watch(prefix: Buffer, fromRevision: bigint, notify: () => void) {
    const watcher = this.host.client.watch().prefix(prefix).startRevision(fromRevision.toString()).watcher();
    const state = {
      endedByServer: false,
      // Settles when etcd confirmed the watch, or ended it already (the loop then makes another).
      connected: new Promise<void>((resolve) => {
        watcher.once('connected', () => resolve());
        watcher.once('error', () => resolve());
      }),
      // Ended by etcd, the client has dropped it: cancelling it again would make that client throw.
      stop: () => {
        if (!state.endedByServer) void watcher.cancel().catch(() => undefined);
      },
    };
    watcher.on('data', notify);
    watcher.on('error', () => {
      state.endedByServer = true;
      notify();
    });
    return state;
  }

  /** Waits until etcd confirmed the watch (true), or signal aborted (false); throws after callTimeoutMs. */
  async #created(watch: { connected: Promise<void>; endedByServer: boolean }, signal?: AbortSignal) {
    try {
      await bounded(watch.connected, signal, this.host.callTimeoutMs, 'creating a watch');
      return true;
    } catch (error) {
      if (signal?.aborted) return false;
      throw await this.host.refused(unavailable('watch failed', error));
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
      throw await this.host.refused(unavailable('reading the leader failed', error));
    }
  }
}

function sameLeader(a: LeaderInfo | null, b: LeaderInfo | null): boolean {
  return a === b || (a !== null && b !== null && a.term === b.term && a.value === b.value);
}
