import type { OwnedLock } from '../ownership.js';
import { validateKey } from '../validate.js';
import { leadershipOf } from './leadership.js';
import type { CampaignOptions, Election, LeaderInfo, Leadership } from './types.js';

/** What a native election needs from its provider to campaign. */
export interface CampaignHost {
  /** The provider's lock wait for `name`, with the proposal `value` as the lock's value. */
  campaignLock(name: string, value: string, opts: CampaignOptions): Promise<OwnedLock>;
}

/**
 * An election of a backend that has one (etcd, ZooKeeper): a campaign is the provider's lock wait
 * with the proposal as the lock's value, so the term is the lock's. Each backend says how a leader
 * writes a new value and how leader() and observe() read the candidates.
 */
export abstract class NativeElection<Host extends CampaignHost> implements Election {
  constructor(
    readonly host: Host,
    readonly name: string,
  ) {
    validateKey(name, 'election name');
  }

  async campaign(value: string, opts: CampaignOptions = {}): Promise<Leadership> {
    const lock = await this.host.campaignLock(this.name, value, opts);
    return leadershipOf(this.name, lock, (next) => this.putIfHeld(lock, next));
  }

  /** Writes the leader's new value only while `lock` is held; false when the term has ended. */
  protected abstract putIfHeld(lock: OwnedLock, value: string): Promise<boolean>;

  abstract leader(): Promise<LeaderInfo | null>;

  abstract observe(opts?: { signal?: AbortSignal }): AsyncIterable<LeaderInfo | null>;
}
