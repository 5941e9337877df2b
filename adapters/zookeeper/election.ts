import type zookeeper from 'node-zookeeper-client';
import { leadershipOf } from '../../src/election/leadership.js';
import type { CampaignOptions, Election, LeaderInfo, Leadership } from '../../src/election/types.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { Lock } from '../../src/types.js';
import { validateKey } from '../../src/validate.js';
import { type ZkSession, zkCode } from './client.js';
import { queueOrder, unavailable, zxid } from './mutex.js';

/** What the election needs from the provider that runs it. */
export interface ElectionHost {
  session(): Promise<ZkSession>;
  folder(name: string): string;
  acl: zookeeper.ACL[];
  campaignLock(name: string, value: string, opts: CampaignOptions): Promise<OwnedLock>;
  nodeOf(lock: Lock): { session: ZkSession; path: string } | undefined;
}

/**
 * LeaderLatch-like election: each candidate is an EPHEMERAL_SEQUENTIAL `_c_<uuid>-latch-<seq>` node
 * holding its proposal; the lowest sequence leads, the others each watch the one before them. The
 * term is the leader node's czxid.
 */
export class ZkElection implements Election {
  constructor(
    readonly host: ElectionHost,
    readonly name: string,
  ) {
    validateKey(name, 'election name');
  }

  async campaign(value: string, opts: CampaignOptions = {}): Promise<Leadership> {
    const lock = await this.host.campaignLock(this.name, value, opts);
    return leadershipOf(this.name, lock, async (next) => {
      const node = this.host.nodeOf(lock);
      if (!node) return false;
      try {
        await node.session.call<zookeeper.Stat>((cb) =>
          node.session.client.setData(node.path, Buffer.from(next), -1, cb),
        );
        return true;
      } catch (error) {
        if (zkCode(error) === 'NO_NODE') return false; // our node, and so the term, is gone
        throw unavailable('proclaim failed', error);
      }
    });
  }

  async leader(): Promise<LeaderInfo | null> {
    return (await this.#read(await this.host.session(), undefined)).leader;
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
      const { leader } = await this.#read(session, wake);
      if (last === undefined || !sameLeader(last, leader)) {
        last = leader;
        yield leader;
      }
      const onAbort = () => wake();
      signal?.addEventListener('abort', onAbort, { once: true });
      const unsubscribe = session.whenLost(() => wake());
      await changed;
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The leader now; with `watch`, arms one-shot watches on the folder and the leader's data. */
  async #read(session: ZkSession, watch: (() => void) | undefined): Promise<{ leader: LeaderInfo | null }> {
    const folder = this.host.folder(this.name);
    let children: string[];
    try {
      children = await session.call<string[]>((cb) =>
        watch
          ? session.client.getChildren(folder, () => watch(), cb)
          : session.client.getChildren(folder, cb),
      );
    } catch (error) {
      if (zkCode(error) !== 'NO_NODE') throw unavailable('reading the candidates failed', error);
      if (watch) {
        // No folder yet: wait for it to appear.
        await session.call<zookeeper.Stat>((cb) => session.client.exists(folder, () => watch(), cb));
      }
      return { leader: null };
    }
    const head = queueOrder(children, 'latch-')[0];
    if (!head) return { leader: null };
    try {
      const path = `${folder}/${head.name}`;
      const [data, stat] = await session.call<[Buffer, zookeeper.Stat]>((cb) => {
        const done = (error: Error | zookeeper.Exception | null, value: Buffer, st: zookeeper.Stat) =>
          cb(error, [value, st]);
        if (watch) session.client.getData(path, () => watch(), done);
        else session.client.getData(path, done);
      });
      return { leader: { value: data?.toString('utf8') ?? '', term: zxid(stat.czxid) } };
    } catch (error) {
      if (zkCode(error) === 'NO_NODE') {
        watch?.(); // it went between the two reads: read again
        return { leader: null };
      }
      throw unavailable('reading the leader failed', error);
    }
  }
}

function sameLeader(a: LeaderInfo | null, b: LeaderInfo | null): boolean {
  return a === b || (a !== null && b !== null && a.term === b.term && a.value === b.value);
}
