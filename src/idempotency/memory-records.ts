import type { StoredOutcome } from './outcome.js';
import type { BeginRequest, BeginResult, CompleteRequest, CompleteResult, RecordBackend } from './records.js';

interface MemoryRecord {
  hash: string;
  attempt: string;
  state: 'running' | 'done';
  token: bigint;
  leaseUntil: number;
  expiresAt: number;
  createdAt: number;
  completedAt?: number;
  outcome?: StoredOutcome;
}

/** The records of one `memory://name`: stores opened on the same name in one process share them. */
class MemoryRecordSpace {
  readonly records = new Map<string, MemoryRecord>();
  lastToken = 0n;
  live(key: string, now: number): MemoryRecord | undefined {
    const record = this.records.get(key);
    if (record && record.expiresAt <= now) this.records.delete(key);
    return record && record.expiresAt > now ? record : undefined;
  }
}

const spaces = new Map<string, MemoryRecordSpace>();

/** In-process records, same rules as the network stores; time is the monotonic clock. */
export class MemoryRecords implements RecordBackend {
  readonly name = 'memory';
  readonly #space: MemoryRecordSpace;

  constructor(spaceName = '') {
    let space = spaces.get(spaceName);
    if (!space) {
      space = new MemoryRecordSpace();
      spaces.set(spaceName, space);
    }
    this.#space = space;
  }

  async begin({ key, hash, leaseMs, retentionMs, attempt }: BeginRequest): Promise<BeginResult> {
    const now = performance.now();
    const record = this.#space.live(key, now);
    if (record) {
      if (record.hash !== hash) return { state: 'mismatch' };
      if (record.state === 'done' && record.outcome) return { state: 'completed', outcome: record.outcome };
      if (record.attempt === attempt) {
        record.leaseUntil = now + leaseMs;
        return { state: 'started', token: record.token };
      }
      if (record.leaseUntil > now)
        return { state: 'in-flight', retryAfterMs: Math.ceil(record.leaseUntil - now) };
    }
    const token = ++this.#space.lastToken;
    this.#space.records.set(key, {
      hash,
      attempt,
      state: 'running',
      token,
      leaseUntil: now + leaseMs,
      expiresAt: now + retentionMs,
      createdAt: record?.createdAt ?? Date.now(),
    });
    return { state: 'started', token };
  }

  async renew(key: string, token: bigint, leaseMs: number): Promise<boolean> {
    const now = performance.now();
    const record = this.#space.live(key, now);
    if (record?.token !== token || record.state !== 'running') return false;
    record.leaseUntil = now + leaseMs;
    record.expiresAt = Math.max(record.expiresAt, record.leaseUntil);
    return true;
  }

  async complete({ key, token, outcome, retentionMs }: CompleteRequest): Promise<CompleteResult> {
    const now = performance.now();
    const record = this.#space.live(key, now);
    if (record?.token !== token) return { stored: false, current: record?.token ?? null };
    if (record.state === 'done') return { stored: true }; // our own earlier attempt
    Object.assign(record, { state: 'done', outcome, completedAt: Date.now(), expiresAt: now + retentionMs });
    return { stored: true };
  }

  async abandon(key: string, token: bigint): Promise<void> {
    const record = this.#space.live(key, performance.now());
    if (record?.token === token && record.state === 'running') record.leaseUntil = Number.NEGATIVE_INFINITY;
  }

  async close(): Promise<void> {}
}
