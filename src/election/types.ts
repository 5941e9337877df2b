/** Leader election over a provider (docs/election.md). Native on etcd and ZooKeeper. */

/** Who leads an election: the value the leader advertises and its term. */
export interface LeaderInfo {
  /** The leader's proposal (identity or endpoint it advertises). */
  value: string;
  /** The leader's fencing token: rises strictly with every new term. */
  term: bigint;
}

/** Options of {@link Election.campaign}. */
export interface CampaignOptions {
  /** Give up after this long with LockTimeoutError. Default: without limit. */
  waitMs?: number;
  /** Cancels the campaign with AbortError; the candidacy is withdrawn. */
  signal?: AbortSignal;
  /**
   * Lock-delay of the term (see AcquireOptions.lockDelayMs): after a leader's term is lost rather
   * than resigned, nobody leads until this long after the loss. Where the election is not a lock
   * that keeps it, the campaign is refused with NotImplementedError.
   */
  lockDelayMs?: number;
}

/** One term as leader. */
export interface Leadership extends AsyncDisposable {
  readonly name: string;
  readonly term: bigint;
  /** Aborted when the term ends: lost, resigned, or leadership can no longer be confirmed. */
  readonly signal: AbortSignal;
  /** Changes the advertised value, only while still leader (NotHolderError otherwise). */
  proclaim(value: string): Promise<void>;
  /** Ends the term at once so the next candidate takes over; idempotent and guarded. */
  resign(): Promise<void>;
}

/**
 * A leader election under one name: candidates campaign, one leads at a time, each term with a
 * fencing token. Made by `createElection(provider, name)`.
 */
export interface Election {
  readonly name: string;
  /** Waits until this candidate leads. */
  campaign(value: string, opts?: CampaignOptions): Promise<Leadership>;
  /** The current leader, or null when there is none. */
  leader(): Promise<LeaderInfo | null>;
  /** The leader now, then every change (null = no leader), until signal aborts. */
  observe(opts?: { signal?: AbortSignal }): AsyncIterable<LeaderInfo | null>;
}
