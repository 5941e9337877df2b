import { DEFAULT_DRIFT_RATE, monotonicNow, safeDeadline } from '../../clock.js';
import { DEFAULT_CALL_TIMEOUT_MS } from '../../provider-base.js';

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

/**
 * The longest one call waits for its answers (fencekit's default call deadline), and never longer
 * than lockTimeout (an answer that late grants nothing: the key is gone by then).
 */
function callTimeoutMs(lockTimeout: number): number {
  return Math.max(1, Math.min(lockTimeout, DEFAULT_CALL_TIMEOUT_MS));
}

export class ClassicLocks {
  readonly #quorum: number;
  /** The give-back of a cancelled attempt, still under way (bounded by the call deadline). */
  #givingBack: Promise<void> = Promise.resolve();

  constructor(
    readonly clients: ReadonlyArray<unknown>,
    /** The Redlock classes: a majority decides and an error is a no; else one client and errors reject. */
    readonly byMajority: boolean,
  ) {
    this.#quorum = byMajority ? Math.round((clients.length + 1) / 2) : 1;
  }

  /**
   * One acquire attempt. It agrees only while the grant is still valid once the answers are in (and,
   * on several clients, once the granters' fencing counters were raised to its token); else what
   * was set is given back, as a minority's partial grant is (Redlock classes). A cancelled or
   * unanswered attempt gives back too: its script may still run.
   */
  async acquire(
    key: string,
    shape: Shape,
    identifier: string,
    lockTimeout: number,
    cancel?: AbortSignal,
  ): Promise<Round> {
    await this.#givingBack; // a cancelled attempt's give-back could delete this attempt's grant
    let round: Round & { granters: unknown[] };
    try {
      round = await this.#answers('acquire', key, shape, identifier, lockTimeout, this.clients, cancel);
      if (round.agreed && (await this.#raiseFences(key, round, cancel)) && monotonicNow() < round.deadline) {
        return round;
      }
    } catch (error) {
      // What it cannot reach expires. A cancelled attempt ends at once; its give-back goes on,
      // and the next attempt of this holder waits for it.
      const givingBack = this.release(key, shape, identifier).catch(() => undefined);
      if (cancel?.aborted) this.#givingBack = givingBack;
      else await givingBack;
      throw error;
    }
    // A refused attempt's partial grant, or a born-lost one: what cannot be deleted expires.
    if (round.agreed || this.byMajority) await this.release(key, shape, identifier).catch(() => undefined);
    return { ...round, agreed: false };
  }

  /**
   * Extends the holder's key while it is still the holder's. With a majority that did, the
   * minority that did not is given the key again (as redis-semaphore does); without, it is given back.
   * `fresh`: an adoption (acquiredExternally), which gets a token of its own.
   */
  async refresh(
    key: string,
    shape: Shape,
    identifier: string,
    lockTimeout: number,
    fresh = false,
  ): Promise<Round> {
    const answers = await this.#answers(
      'refresh',
      key,
      shape,
      identifier,
      lockTimeout,
      this.clients,
      undefined,
      fresh,
    );
    if (answers.agreed && answers.missing.length > 0) {
      await this.#answers('acquire', key, shape, identifier, lockTimeout, answers.missing).catch(
        () => undefined,
      );
    }
    if (fresh && answers.agreed && !(await this.#raiseFences(key, answers))) {
      return { ...answers, agreed: false };
    }
    if (!answers.agreed && this.byMajority) await this.release(key, shape, identifier);
    return answers;
  }

  /** Deletes the holder's key or members, within the call deadline (what it cannot reach expires). */
  async release(key: string, shape: Shape, identifier: string): Promise<void> {
    const { evalRound, MUTEX_RELEASE, SEMAPHORE_RELEASE } = await loadAdapter();
    const script = shape.kind === 'mutex' ? MUTEX_RELEASE : SEMAPHORE_RELEASE;
    const args = shape.kind === 'mutex' ? [identifier] : [shape.permits, identifier, shape.multi ? '1' : '0'];
    const answers = await evalRound(this.clients, script, [key], args, {
      quorum: this.clients.length, // every instance is asked to the end (within the deadline)
      votesFor: () => true,
      timeoutMs: DEFAULT_CALL_TIMEOUT_MS,
    });
    const failed = answers.find((a): a is { client: unknown; error: Error } => 'error' in a);
    if (!this.byMajority && failed) throw failed.error; // one client: its error is the caller's
  }

  /**
   * Raises each granter's fencing counter to the round's token, so that any later majority (which
   * shares a client with this one) counts above it: true once a majority did, within the grant's
   * deadline. One client is its own majority: its counter gave the token.
   */
  async #raiseFences(
    key: string,
    round: Round & { granters: unknown[] },
    cancel?: AbortSignal,
  ): Promise<boolean> {
    if (this.clients.length === 1) return true;
    const { RAISE_FENCES, evalRound, fenceKeyOf } = await loadAdapter();
    const answers = await evalRound(
      round.granters,
      RAISE_FENCES,
      [fenceKeyOf(key)],
      [round.token.toString()],
      {
        quorum: this.#quorum,
        votesFor: (reply) => Number(reply) === 1,
        timeoutMs: Math.max(1, Math.min(round.deadline - monotonicNow(), DEFAULT_CALL_TIMEOUT_MS)),
        cancel,
      },
    );
    return answers.filter((a) => 'reply' in a && Number(a.reply) === 1).length >= this.#quorum;
  }

  async #answers(
    step: 'acquire' | 'refresh',
    key: string,
    shape: Shape,
    identifier: string,
    lockTimeout: number,
    clients: ReadonlyArray<unknown>,
    cancel?: AbortSignal,
    fresh = false,
  ): Promise<Round & { missing: unknown[]; granters: unknown[] }> {
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
    const flag = fresh ? '1' : '0';
    const args =
      shape.kind === 'mutex'
        ? [identifier, lockTimeout, flag]
        : [shape.limit, shape.permits, identifier, lockTimeout, now, shape.multi ? '1' : '0', flag];
    const keys = [key, redis.fenceKeyOf(key)];
    const sentAt = monotonicNow();
    const answers = await redis.evalRound(clients, script, keys, args, {
      quorum: this.byMajority ? this.#quorum : clients.length,
      votesFor: (reply) => String(reply) !== '0',
      timeoutMs: callTimeoutMs(lockTimeout),
      cancel,
    });
    const rttMs = monotonicNow() - sentAt;
    let token = 0n;
    const missing: unknown[] = [];
    const granters: unknown[] = [];
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
      granters.push(answer.client);
      const granted = BigInt(reply);
      if (granted > token) token = granted;
    }
    const agreed = granters.length >= this.#quorum;
    return {
      agreed,
      token,
      deadline: safeDeadline(sentAt, lockTimeout, rttMs, DEFAULT_DRIFT_RATE),
      missing,
      granters,
    };
  }
}
