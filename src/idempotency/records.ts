import type { StoredOutcome } from './outcome.js';

/** What {@link RecordBackend.begin} is asked: the start of a run under an idempotency key. */
export interface BeginRequest {
  key: string;
  /** The payload's hash: a record of the key with another hash is a mismatch. */
  hash: string;
  /** How long the run holds the record without a renewal. */
  leaseMs: number;
  /** How long the record is kept from now. */
  retentionMs: number;
  /** Which start this is: a record started under the same attempt is this start's own. */
  attempt: string;
}

/** What {@link RecordBackend.begin} answers: who runs fn, or what the caller gets instead. */
export type BeginResult =
  /** The caller now holds the record's lease under this token and must run fn. */
  | { state: 'started'; token: bigint }
  | { state: 'completed'; outcome: StoredOutcome }
  | { state: 'mismatch' }
  | { state: 'in-flight'; retryAfterMs: number };

/** What {@link RecordBackend.complete} is asked: the outcome of the run that `token` started. */
export interface CompleteRequest {
  key: string;
  token: bigint;
  outcome: StoredOutcome;
  /** How long the record is kept from now. */
  retentionMs: number;
}

/** What storing a run's outcome answers: stored, or not because another run holds the record now. */
export type CompleteResult = { stored: true } | { stored: false; current: bigint | null };

/**
 * One backend's records, keyed by idempotency key. Every method is one atomic step on the server,
 * timed by the server's clock. Tokens come from one counter per store, so they rise per key and are
 * never handed out twice, even after a record expired and its key was used again.
 */
export interface RecordBackend {
  readonly name: 'memory' | 'redis' | 'postgres' | 'etcd';
  /**
   * New or expired key → start (new token, lease); running with an expired lease and the same
   * payload hash → take over (new token); running under the same `attempt` (this run's own start,
   * whose reply was lost) → adopt it with its lease restarted; otherwise report what is there.
   */
  begin(request: BeginRequest): Promise<BeginResult>;
  /** Extends the lease while `token` still owns a running record. */
  renew(key: string, token: bigint, leaseMs: number): Promise<boolean>;
  /**
   * Stores the outcome only while `token` still owns a running record (the fenced completion). A
   * record already done under `token` counts as stored: it was this run's own attempt, retried.
   */
  complete(request: CompleteRequest): Promise<CompleteResult>;
  /** Ends the lease now (fn failed with a retryable error) so a repeat may run at once. */
  abandon(key: string, token: bigint): Promise<void>;
  close(): Promise<void>;
}
