import { randomBytes } from 'node:crypto';
import { DEFAULT_DRIFT_RATE, monotonicNow, safeDeadline } from '../../clock.js';
import { OwnedLock } from '../../ownership.js';
import { DEFAULT_CALL_TIMEOUT_MS } from '../../provider-base.js';
import { anyLockLost } from '../../signals.js';
import { abortableDelay } from '../../timers.js';
import { ExecutionError, type ExecutionStats, ResourceLockedError } from './errors.js';
import type { LockGrant } from './lock.js';
import { expirationOf, type Settings } from './settings.js';

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

/** What one successful operation brings back: its attempts, its granters' replies and its timing. */
interface Outcome {
  attempts: Array<Promise<ExecutionStats>>;
  /** The clients that voted for, with their replies. */
  granted: Array<{ client: unknown; reply: unknown }>;
  /** When the successful attempt was sent: monotonic (for the grant's deadline) and wall-clock. */
  sentAt: number;
  wallSentAt: number;
  rttMs: number;
}

/** How one operation runs its attempts (see #execute). */
interface Plan {
  /** The count a vote for answers (resources applied to), or that many tokens. */
  expected: number;
  /** How long one attempt waits for answers: a client silent that long votes against. */
  timeoutMs: number;
  /** Wall-clock ms after which no retry starts (the lock's expiration: its keys are gone by then). */
  stopAt?: number;
  /** Ends the operation with its reason (quit()); the caller gives back what may have been set. */
  cancel?: AbortSignal | undefined;
  /** A majority agreed: whether that makes the outcome. false: the attempt failed, retried as one. */
  accept?: (outcome: Outcome) => Promise<boolean>;
}

/**
 * The longest one attempt waits for its answers (fencekit's default call deadline); an acquire's
 * and an extend's no longer than the duration either, since an answer that late can grant nothing
 * (the keys are gone by then). redlock waits for every client without a limit: one hung client
 * would hang every call.
 */
const ATTEMPT_TIMEOUT_MS = DEFAULT_CALL_TIMEOUT_MS;

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

  /**
   * A new lock's value, its grant and the attempts it took; rejects as redlock does. Unlike
   * redlock, an attempt is a grant only if it is still valid when its answers are in (and, on
   * several clients, once the granters' fencing counters were raised to its tokens): a late
   * majority's keys are given back and the attempt counts as failed, so no lock is handed out with
   * its expiration already passed.
   */
  async acquire(
    resources: string[],
    duration: number,
    settings: Settings,
    cancel?: AbortSignal,
  ): Promise<{
    value: string;
    grant: ClassicGrant;
    attempts: Array<Promise<ExecutionStats>>;
    expiration: number;
  }> {
    checkIntegerDuration(duration);
    const value = randomBytes(16).toString('hex');
    const redis = await loadAdapter();
    const keys = [...resources, ...resources.map(redis.fenceKeyOf)];
    const deadlineOf = (o: Outcome) => safeDeadline(o.sentAt, duration, o.rttMs, DEFAULT_DRIFT_RATE);
    const giveBack = () => this.#giveBack(resources, value, settings);
    let outcome: Outcome;
    try {
      outcome = await this.#execute(redis.REDLOCK_ACQUIRE, keys, [value, duration], settings, {
        expected: resources.length,
        timeoutMs: Math.min(duration, ATTEMPT_TIMEOUT_MS),
        cancel,
        accept: async (o) => {
          const deadline = deadlineOf(o);
          const raised = await this.#raiseFences(resources, o, deadline, cancel);
          if (raised && monotonicNow() < deadline) return true;
          await giveBack(); // born lost: this attempt's keys go back before the next attempt
          return false;
        },
      });
    } catch (error) {
      // Gives back what a minority (or a late or cancelled attempt) may have set, once, as redlock does.
      await giveBack();
      throw error;
    }
    const grant = new ClassicGrant(
      resources.map((resource, index) => {
        const lock = new OwnedLock({
          key: resource,
          fencingToken: highestToken(outcome.granted, index),
          ownerToken: value,
          releaseOnBackend: () => Promise.resolve(), // the grant releases all its keys in one script
        });
        lock.confirmUntil(deadlineOf(outcome));
        return lock;
      }),
      (released) => this.release(resources, value, released).then(() => undefined),
      settings,
    );
    const expiration = expirationOf(outcome.wallSentAt, duration, settings);
    return { value, grant, attempts: outcome.attempts, expiration };
  }

  /**
   * Sets every resource again for `duration` while it still holds `value`; moves the grant's
   * deadline. Retries stop at the lock's current expiration (`expiresAt`, wall-clock ms): its keys
   * are gone by then, so retryCount -1 cannot retry forever; an extension that comes back too late,
   * or after the grant was lost, is no extension. Resolves with the new expiration.
   */
  async extend(
    grant: ClassicGrant,
    resources: string[],
    value: string,
    duration: number,
    settings: Settings,
    expiresAt: number,
    cancel?: AbortSignal,
  ): Promise<{ attempts: Array<Promise<ExecutionStats>>; expiration: number }> {
    checkIntegerDuration(duration);
    const { REDLOCK_EXTEND } = await loadAdapter();
    const outcome = await this.#execute(REDLOCK_EXTEND, resources, [value, duration], settings, {
      expected: resources.length,
      timeoutMs: Math.min(duration, ATTEMPT_TIMEOUT_MS),
      stopAt: expiresAt,
      cancel,
      accept: async (o) => {
        const deadline = safeDeadline(o.sentAt, duration, o.rttMs, DEFAULT_DRIFT_RATE);
        // Lost or stopped meanwhile: no later attempt may set the keys again for nobody.
        if (!grant.held) throw new ExecutionError('The lock was lost before it was extended.', o.attempts);
        if (monotonicNow() >= deadline) return false;
        grant.confirmUntil(deadline);
        return true;
      },
    });
    return { attempts: outcome.attempts, expiration: expirationOf(outcome.wallSentAt, duration, settings) };
  }

  /**
   * Deletes each resource that still holds `value`; rejects unless a majority deleted all of them.
   * Retries stop at `stopAt` (the lock's expiration, wall-clock ms): its keys are gone by then.
   */
  async release(
    resources: string[],
    value: string,
    settings: Settings,
    stopAt?: number,
  ): Promise<{ attempts: Array<Promise<ExecutionStats>> }> {
    const { REDLOCK_RELEASE } = await loadAdapter();
    const { attempts } = await this.#execute(REDLOCK_RELEASE, resources, [value], settings, {
      expected: resources.length,
      timeoutMs: ATTEMPT_TIMEOUT_MS,
      ...(stopAt === undefined ? {} : { stopAt }),
    });
    return { attempts };
  }

  /** One release attempt for keys that must not stay set; what it cannot delete expires by itself. */
  async #giveBack(resources: string[], value: string, settings: Settings): Promise<void> {
    await this.release(resources, value, { ...settings, retryCount: 0 }).catch(() => undefined);
  }

  /**
   * Raises each granter's fencing counters to the grant's tokens, so that any later majority
   * (which shares a client with this one) counts above them: true once a majority did, within the
   * grant's deadline. One client is its own majority: its counter gave the token.
   */
  async #raiseFences(
    resources: string[],
    outcome: Outcome,
    deadline: number,
    cancel: AbortSignal | undefined,
  ): Promise<boolean> {
    if (this.clients.length === 1) return true;
    const { RAISE_FENCES, evalRound, fenceKeyOf } = await loadAdapter();
    const tokens = resources.map((_, index) => highestToken(outcome.granted, index).toString());
    const answers = await evalRound(
      outcome.granted.map((g) => g.client),
      RAISE_FENCES,
      resources.map(fenceKeyOf),
      tokens,
      {
        quorum: this.quorum,
        votesFor: (reply) => Number(reply) === resources.length,
        timeoutMs: Math.max(1, Math.min(deadline - monotonicNow(), ATTEMPT_TIMEOUT_MS)),
        cancel,
      },
    );
    return answers.filter((a) => 'reply' in a && Number(a.reply) === resources.length).length >= this.quorum;
  }

  /**
   * redlock's retry loop: one attempt on every client, again after retryDelay ± retryJitter until
   * a majority answers `expected` (a count, or that many tokens) and the plan accepts it, or
   * retryCount retries are spent, or plan.stopAt passed.
   */
  async #execute(
    script: import('../../../adapters/redis/classic-clients.js').Script,
    keys: string[],
    args: Array<string | number>,
    settings: Settings,
    plan: Plan,
  ): Promise<Outcome> {
    const { evalRound } = await loadAdapter();
    const maxAttempts = settings.retryCount === -1 ? Number.POSITIVE_INFINITY : settings.retryCount + 1;
    const attempts: Array<Promise<ExecutionStats>> = [];
    const expected = plan.expected;
    for (;;) {
      const sentAt = monotonicNow();
      const wallSentAt = Date.now();
      const answers = await evalRound(this.clients, script, keys, args, {
        quorum: this.quorum,
        votesFor: (reply) => refusal(reply, expected) === undefined,
        timeoutMs: plan.timeoutMs,
        cancel: plan.cancel,
      });
      const rttMs = monotonicNow() - sentAt;
      const stats: ExecutionStats = {
        membershipSize: this.clients.length,
        quorumSize: this.quorum,
        votesFor: new Set(),
        votesAgainst: new Map(),
      };
      const granted: Outcome['granted'] = [];
      for (const answer of answers) {
        const error = 'error' in answer ? answer.error : refusal(answer.reply, expected);
        if (error) {
          stats.votesAgainst.set(answer.client, error);
          this.onError(error);
        } else {
          stats.votesFor.add(answer.client);
          granted.push(answer as { client: unknown; reply: unknown });
        }
      }
      attempts.push(Promise.resolve(stats));
      if (stats.votesFor.size >= this.quorum) {
        const outcome = { attempts, granted, sentAt, wallSentAt, rttMs };
        if (!plan.accept || (await plan.accept(outcome))) return outcome;
      }
      const pause = Math.max(
        0,
        settings.retryDelay + Math.floor((Math.random() * 2 - 1) * settings.retryJitter),
      );
      const stopped = plan.stopAt !== undefined && Date.now() + pause >= plan.stopAt;
      if (attempts.length >= maxAttempts || stopped) {
        throw new ExecutionError(
          'The operation was unable to achieve a quorum during its retry window.',
          attempts,
        );
      }
      await abortableDelay(pause, plan.cancel);
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
 * A resource's token: the highest among the clients that granted. Before the grant is handed out
 * every granter's counter is raised to it (#raiseFences); two majorities share a client, whose
 * counter then counts above it for the later grant, so the later grant's highest is higher.
 */
function highestToken(granted: Outcome['granted'], index: number): bigint {
  let highest = 0n;
  for (const { reply } of granted) {
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
