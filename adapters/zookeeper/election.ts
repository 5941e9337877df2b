import { type CampaignHost, NativeElection } from '../../src/election/native-election.js';
import type { LeaderInfo } from '../../src/election/types.js';
import { BackendUnavailableError } from '../../src/errors.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { Lock } from '../../src/types.js';
import { type ZkSession, zkCode } from './client.js';
import { confirmThroughLeader } from './heartbeat.js';
import { queueOrder } from './mutex.js';
import { unavailable } from './unavailable.js';
import type { ACL } from './wire/ops.js';

/** What the election needs from the provider that runs it. */
export interface ElectionHost extends CampaignHost {
  readonly callTimeoutMs: number;
  session(): Promise<ZkSession>;
  folder(name: string): string;
  acl: readonly ACL[];
  nodeOf(lock: Lock): { session: ZkSession; path: string } | undefined;
}

/**
 * LeaderLatch-like election: each candidate is an EPHEMERAL_SEQUENTIAL `_c_<uuid>-latch-<seq>` node
 * holding its proposal; the lowest sequence leads, the others each watch the one before them. The
 * term is the leader node's czxid.
 */
export class ZkElection extends NativeElection<ElectionHost> {
  protected async putIfHeld(lock: OwnedLock, value: string): Promise<boolean> {
    const node = this.host.nodeOf(lock);
    if (!node) return false;
    try {
      await node.session.client.setData(node.path, Buffer.from(value), -1);
      return true;
    } catch (error) {
      if (zkCode(error) === 'NO_NODE') return false; // our node, and so the term, is gone
      throw unavailable('proclaim failed', error);
    }
  }

  async leader(): Promise<LeaderInfo | null> {
    return (await this.#read(await this.host.session(), undefined, [])).leader;
  }

  async *observe(opts: { signal?: AbortSignal } = {}): AsyncIterable<LeaderInfo | null> {
    const signal = opts.signal;
    let last: LeaderInfo | null | undefined;
    while (!signal?.aborted) {
      const session = await this.host.session();
      let wake!: () => void;
      const changed = new Promise<void>((resolve) => {
        wake = resolve;
      });
      const onChange = () => wake();
      const watched: string[] = [];
      let unsubscribe = (): void => undefined;
      // Whatever ends this round (a change, a failed read, the consumer leaving at the yield), the
      // watches it armed have no one left to tell.
      try {
        const { leader } = await this.#read(session, onChange, watched);
        if (last === undefined || !sameLeader(last, leader)) {
          last = leader;
          yield leader;
        }
        signal?.addEventListener('abort', onChange, { once: true });
        if (signal?.aborted) onChange(); // stopped while the caller had the value: no abort event comes
        unsubscribe = session.whenLost(onChange);
        await changed;
      } finally {
        unsubscribe();
        signal?.removeEventListener('abort', onChange);
        for (const path of watched) session.client.unwatch(path, onChange);
      }
    }
  }

  /**
   * The leader now; with `watch`, arms one-shot watches on the folder and the leader's data, each
   * path added to `watched` before its call (so the caller can unwatch even when a read fails).
   * A write through the leader first (heartbeat.ts's check of '/', committed by a quorum): the
   * server we are connected to answers reads from its own copy, and one cut off from the rest (a
   * follower, or a leader that has not yet noticed it lost its quorum) serves a stale one for up to
   * syncLimit × tickTime. Once that write is answered, the server has applied everything committed
   * before it, so no term that ended before the call is reported; a server cut off fails the call.
   * (ZooKeeper's sync is not enough: a leader answers it alone.)
   * The leader's node may go between the listing and the read of its data: then the folder is
   * listed again, as the next candidate may lead already. No leader only when the listing is empty.
   */
  async #read(
    session: ZkSession,
    watch: (() => void) | undefined,
    watched: string[],
  ): Promise<{ leader: LeaderInfo | null }> {
    const folder = this.host.folder(this.name);
    try {
      await confirmThroughLeader(session.client, this.host.callTimeoutMs);
    } catch (error) {
      throw unavailable('reading the candidates failed', error);
    }
    if (watch) watched.push(folder);
    // Each round follows a leader's node deleted under us; a folder that churns this fast is
    // reported as unavailable rather than read forever.
    for (let round = 0; round < MAX_READ_ROUNDS; round++) {
      let children: string[];
      try {
        children = await session.client.getChildren(folder, watch ? { watch } : {});
      } catch (error) {
        if (zkCode(error) !== 'NO_NODE') throw unavailable('reading the candidates failed', error);
        if (watch) {
          // No folder yet: wait for it to appear.
          await session.client.exists(folder, { watch }).catch((e: unknown) => {
            throw unavailable('watching the candidates failed', e);
          });
        }
        return { leader: null };
      }
      const head = queueOrder(children, 'latch-')[0];
      if (!head) return { leader: null };
      const path = `${folder}/${head.name}`;
      if (watch) watched.push(path);
      try {
        const { data, stat } = await session.client.getData(path, watch ? { watch } : {});
        return { leader: { value: data.toString('utf8'), term: stat.czxid } };
      } catch (error) {
        if (zkCode(error) !== 'NO_NODE') throw unavailable('reading the leader failed', error);
      }
    }
    throw new BackendUnavailableError(
      `zookeeper: the leader of "${this.name}" changed ${MAX_READ_ROUNDS} times while it was read`,
    );
  }
}

/** Listings of the candidates one read of the leader makes at most. */
const MAX_READ_ROUNDS = 100;

function sameLeader(a: LeaderInfo | null, b: LeaderInfo | null): boolean {
  return a === b || (a !== null && b !== null && a.term === b.term && a.value === b.value);
}
