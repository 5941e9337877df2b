import { DEFAULT_DRIFT_RATE, monotonicNow, safeDeadline } from '../../clock.js';

/**
 * redis-semaphore's own keys and protocol on the app's clients, so that replicas still running
 * redis-semaphore and replicas running the facade exclude each other: `mutex:<key>` holds the
 * holder's identifier (SET NX PX, refreshed and deleted only while it holds it); `semaphore:<key>`
 * is a sorted set of identifiers (`<identifier>_<i>` for MultiSemaphore) scored by the holder's
 * clock, members older than lockTimeout dropped before each count. One client decides alone (an
 * error rejects); several (the Redlock classes) decide by majority, an error counting as a no. The
 * scripts also count a fencing token per key (adapters/redis/classic-scripts.ts).
 */

type Adapter = typeof import('../../../adapters/redis/classic-clients.js');
let adapter: Promise<Adapter> | undefined;
/** The redis adapter is loaded on first use only: the facade over another provider needs no ioredis. */
function loadAdapter(): Promise<Adapter> {
  adapter ??= import('../../../adapters/redis/classic-clients.js');
  return adapter;
}

/** What is locked: a mutex, or `permits` of a semaphore's `limit`. */
export interface Shape {
  readonly kind: 'mutex' | 'semaphore';
  readonly limit: number;
  readonly permits: number;
  /** MultiSemaphore's member names (`<identifier>_<i>`). */
  readonly multi: boolean;
}

/** One round on the clients: whether a quorum agreed, the highest token, and when it was sent. */
export interface Round {
  readonly agreed: boolean;
  readonly token: bigint;
  /** The last moment (monotonic) the grant can still be trusted, if agreed. */
  readonly deadline: number;
}

export class ClassicLocks {
  readonly #quorum: number;

  constructor(
    readonly clients: ReadonlyArray<unknown>,
    /** The Redlock classes: a majority decides and an error is a no; else one client and errors reject. */
    readonly byMajority: boolean,
  ) {
    this.#quorum = byMajority ? Math.round((clients.length + 1) / 2) : 1;
  }

  /** One acquire attempt; a minority's partial grant is given back (Redlock classes). */
  async acquire(key: string, shape: Shape, identifier: string, lockTimeout: number): Promise<Round> {
    const round = await this.#answers('acquire', key, shape, identifier, lockTimeout, this.clients);
    if (!round.agreed && this.byMajority) await this.release(key, shape, identifier);
    return round;
  }

  /**
   * Extends the holder's key while it is still the holder's. With a majority that did, the
   * minority that did not is given the key again (as redis-semaphore does); without, it is given back.
   */
  async refresh(key: string, shape: Shape, identifier: string, lockTimeout: number): Promise<Round> {
    const answers = await this.#answers('refresh', key, shape, identifier, lockTimeout, this.clients);
    if (answers.agreed && answers.missing.length > 0) {
      await this.#answers('acquire', key, shape, identifier, lockTimeout, answers.missing);
    }
    if (!answers.agreed && this.byMajority) await this.release(key, shape, identifier);
    return answers;
  }

  async release(key: string, shape: Shape, identifier: string): Promise<void> {
    const { evalOnAll, evalOn, MUTEX_RELEASE, SEMAPHORE_RELEASE } = await loadAdapter();
    const script = shape.kind === 'mutex' ? MUTEX_RELEASE : SEMAPHORE_RELEASE;
    const args = shape.kind === 'mutex' ? [identifier] : [shape.permits, identifier, shape.multi ? '1' : '0'];
    if (!this.byMajority) {
      await evalOn(this.clients[0], script, [key], args);
      return;
    }
    await evalOnAll(this.clients, script, [key], args); // an unreachable instance's key expires by itself
  }

  async #answers(
    step: 'acquire' | 'refresh',
    key: string,
    shape: Shape,
    identifier: string,
    lockTimeout: number,
    clients: ReadonlyArray<unknown>,
  ): Promise<Round & { missing: unknown[] }> {
    const redis = await loadAdapter();
    const script =
      shape.kind === 'mutex'
        ? step === 'acquire'
          ? redis.MUTEX_ACQUIRE
          : redis.MUTEX_REFRESH
        : step === 'acquire'
          ? redis.SEMAPHORE_ACQUIRE
          : redis.SEMAPHORE_REFRESH;
    const now = Date.now(); // the scores are the holders' clocks, as redis-semaphore's are
    const args =
      shape.kind === 'mutex'
        ? [identifier, lockTimeout]
        : [shape.limit, shape.permits, identifier, lockTimeout, now, shape.multi ? '1' : '0'];
    const keys = [key, redis.fenceKeyOf(key)];
    const sentAt = monotonicNow();
    const answers = await redis.evalOnAll(clients, script, keys, args);
    const rttMs = monotonicNow() - sentAt;
    let token = 0n;
    let votes = 0;
    const missing: unknown[] = [];
    for (const answer of answers) {
      if ('error' in answer) {
        if (!this.byMajority) throw answer.error;
        missing.push(answer.client);
        continue;
      }
      const reply = String(answer.reply);
      if (reply === '0') {
        missing.push(answer.client);
        continue;
      }
      votes++;
      const granted = BigInt(reply);
      if (granted > token) token = granted;
    }
    const agreed = votes >= this.#quorum;
    return {
      agreed,
      token,
      deadline: safeDeadline(sentAt, lockTimeout, rttMs, DEFAULT_DRIFT_RATE),
      missing,
    };
  }
}
