import { randomBytes } from 'node:crypto';
import { DEFAULT_DRIFT_RATE, monotonicNow, safeDeadline } from '../../clock.js';
import { OwnedLock } from '../../ownership.js';
import { anyLockLost } from '../../signals.js';
import { ExecutionError, type ExecutionStats, ResourceLockedError } from './errors.js';
import type { LockGrant } from './lock.js';
import type { Settings } from './settings.js';

/**
 * redlock's own protocol on the app's clients, so that replicas still running redlock and replicas
 * running the facade exclude each other: each resource is a key holding the lock's random value
 * (SET PX when none of them exists), extended and released only while it still holds that value,
 * polled retryCount more times retryDelay ± retryJitter apart, granted by a majority of the
 * clients. The scripts also count a fencing token per resource (adapters/redis/classic-scripts.ts).
 */

type Adapter = typeof import('../../../adapters/redis/classic-clients.js');
let adapter: Promise<Adapter> | undefined;
/** The redis adapter is loaded on first use only: the facade over another provider needs no ioredis. */
function loadAdapter(): Promise<Adapter> {
  adapter ??= import('../../../adapters/redis/classic-clients.js');
  return adapter;
}

/** What one successful operation brings back: its attempts, and the grant's timing for the deadline. */
interface Outcome {
  attempts: Array<Promise<ExecutionStats>>;
  replies: unknown[];
  sentAt: number;
  rttMs: number;
}

/** redlock's message for a duration that is not an integer (it takes any integer, even 0). */
export function checkIntegerDuration(duration: number): void {
  if (Math.floor(duration) !== duration) {
    throw new Error('Duration must be an integer value in milliseconds.');
  }
}

export class ClassicRedlock {
  readonly quorum: number;

  constructor(
    readonly clients: ReadonlyArray<unknown>,
    /** Every vote against is reported here (redlock emits it as 'error'). */
    readonly onError: (error: Error) => void,
  ) {
    this.quorum = Math.floor(clients.length / 2) + 1;
  }

  /** A new lock's value, its grant and the attempts it took; rejects as redlock does. */
  async acquire(
    resources: string[],
    duration: number,
    settings: Settings,
  ): Promise<{ value: string; grant: ClassicGrant; attempts: Array<Promise<ExecutionStats>> }> {
    checkIntegerDuration(duration);
    const value = randomBytes(16).toString('hex');
    const { REDLOCK_ACQUIRE, fenceKeyOf } = await loadAdapter();
    const keys = [...resources, ...resources.map(fenceKeyOf)];
    let outcome: Outcome;
    try {
      outcome = await this.#execute(REDLOCK_ACQUIRE, keys, [value, duration], settings, resources.length);
    } catch (error) {
      // Gives back what a minority may have set, once, as redlock does.
      await this.release(resources, value, { ...settings, retryCount: 0 }).catch(() => undefined); // its keys expire by themselves
      throw error;
    }
    const grant = new ClassicGrant(
      resources.map((resource, index) => {
        const lock = new OwnedLock({
          key: resource,
          fencingToken: highestToken(outcome.replies, index),
          ownerToken: value,
          releaseOnBackend: () => Promise.resolve(), // the grant releases all its keys in one script
        });
        lock.confirmUntil(safeDeadline(outcome.sentAt, duration, outcome.rttMs, DEFAULT_DRIFT_RATE));
        return lock;
      }),
      (released) => this.release(resources, value, released).then(() => undefined),
      settings,
    );
    return { value, grant, attempts: outcome.attempts };
  }

  /** Sets every resource again for `duration` while it still holds `value`; moves the grant's deadline. */
  async extend(
    grant: ClassicGrant,
    resources: string[],
    value: string,
    duration: number,
    settings: Settings,
  ): Promise<Array<Promise<ExecutionStats>>> {
    checkIntegerDuration(duration);
    const { REDLOCK_EXTEND } = await loadAdapter();
    const outcome = await this.#execute(
      REDLOCK_EXTEND,
      resources,
      [value, duration],
      settings,
      resources.length,
    );
    grant.confirmUntil(safeDeadline(outcome.sentAt, duration, outcome.rttMs, DEFAULT_DRIFT_RATE));
    return outcome.attempts;
  }

  /** Deletes each resource that still holds `value`; rejects unless a majority deleted all of them. */
  async release(
    resources: string[],
    value: string,
    settings: Settings,
  ): Promise<{ attempts: Array<Promise<ExecutionStats>> }> {
    const { REDLOCK_RELEASE } = await loadAdapter();
    const { attempts } = await this.#execute(REDLOCK_RELEASE, resources, [value], settings, resources.length);
    return { attempts };
  }

  /**
   * redlock's retry loop: one attempt on every client, again after retryDelay ± retryJitter until
   * a majority answers `expected` (a count, or that many tokens) or retryCount retries are spent.
   */
  async #execute(
    script: import('../../../adapters/redis/classic-clients.js').Script,
    keys: string[],
    args: Array<string | number>,
    settings: Settings,
    expected: number,
  ): Promise<Outcome> {
    const { evalOnAll } = await loadAdapter();
    const maxAttempts = settings.retryCount === -1 ? Number.POSITIVE_INFINITY : settings.retryCount + 1;
    const attempts: Array<Promise<ExecutionStats>> = [];
    for (;;) {
      const sentAt = monotonicNow();
      const answers = await evalOnAll(this.clients, script, keys, args);
      const rttMs = monotonicNow() - sentAt;
      const stats: ExecutionStats = {
        membershipSize: this.clients.length,
        quorumSize: this.quorum,
        votesFor: new Set(),
        votesAgainst: new Map(),
      };
      const replies: unknown[] = [];
      for (const answer of answers) {
        const error = 'error' in answer ? answer.error : refusal(answer.reply, expected);
        if (error) {
          stats.votesAgainst.set(answer.client, error);
          this.onError(error);
        } else {
          stats.votesFor.add(answer.client);
          replies.push((answer as { reply: unknown }).reply);
        }
      }
      attempts.push(Promise.resolve(stats));
      if (stats.votesFor.size >= this.quorum) return { attempts, replies, sentAt, rttMs };
      if (attempts.length >= maxAttempts) {
        throw new ExecutionError(
          'The operation was unable to achieve a quorum during its retry window.',
          attempts,
        );
      }
      const jitter = Math.floor((Math.random() * 2 - 1) * settings.retryJitter);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, settings.retryDelay + jitter)));
    }
  }
}

/** Why a client's reply is a vote against (redlock's ResourceLockedError), or undefined for a vote for. */
function refusal(reply: unknown, expected: number): Error | undefined {
  const applied = Array.isArray(reply) ? reply.length : Number(reply);
  if (applied === expected) return undefined;
  return new ResourceLockedError(
    `The operation was applied to: ${applied} of the ${expected} requested resources.`,
  );
}

/**
 * A resource's token: the highest among the clients that granted. Two majorities share a client,
 * whose counter grew with the later grant, so the highest of a later grant is higher.
 */
function highestToken(replies: unknown[], index: number): bigint {
  let highest = 0n;
  for (const reply of replies) {
    const token = BigInt(String((reply as unknown[])[index]));
    if (token > highest) highest = token;
  }
  return highest;
}

/**
 * The grant of a lock on the original's keys: one OwnedLock per resource (fencekit's loss signal:
 * aborted before the keys can have expired on the server), released in one script. The keys
 * expire by themselves, so expireAt has nothing to do.
 */
export class ClassicGrant implements LockGrant {
  readonly locks: ReadonlyMap<string, OwnedLock>;
  #signal: AbortSignal | undefined;
  #released = false;

  constructor(
    locks: OwnedLock[],
    private readonly releaseKeys: (settings: Settings) => Promise<void>,
    private readonly settings: Settings,
  ) {
    this.locks = new Map(locks.map((lock) => [lock.key, lock]));
  }

  get signal(): AbortSignal {
    this.#signal ??= anyLockLost([...this.locks.values()]);
    return this.#signal;
  }

  get held(): boolean {
    for (const lock of this.locks.values()) if (!lock.held) return false;
    return true;
  }

  get released(): boolean {
    return this.#released;
  }

  expireAt(_at: number | undefined): void {}

  confirmUntil(deadline: number): void {
    for (const lock of this.locks.values()) lock.confirmUntil(deadline);
  }

  /** The work stops: the signal aborts with reason 'released'. The keys are left to the caller. */
  stop(): void {
    this.#released = true;
    for (const lock of this.locks.values()) void lock.release(); // its backend release is a no-op
  }

  /** Stops the work first, then deletes the keys still holding the value. */
  release(settings: Settings = this.settings): Promise<void> {
    this.stop();
    return this.releaseKeys(settings);
  }
}
