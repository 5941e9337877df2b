import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { monotonicNow } from '../../src/clock.js';
import { leasedLock } from '../../src/lease-renewal.js';
import type { OwnedLock } from '../../src/ownership.js';
import { boundedCall } from './bounded-call.js';
import { extendHanded, type HandedGrant, refusalFence, WaiterEar } from './hand-over.js';
import { CleanUpDue, type Leftovers } from './leftovers.js';
import type { WaiterNotices } from './notices.js';

/** What a queued recipe (semaphore, read-write lock) borrows from its provider. */
export interface QueuedGrantClient {
  driftRate: number;
  notices: WaiterNotices;
  leftovers: Leftovers;
  maxPollMs: number;
  waiterTtlMs: number;
  callTimeoutMs: number;
  /** One command with the provider's deadline (callTimeoutMs) and the request's cancel signal. */
  call<T>(what: string, run: () => Promise<T>, cancel?: AbortSignal): Promise<T>;
  /** Counts a notice that woke a waiter. */
  woken(): void;
}

/** "Not yours": [−(ms until the soonest lease may expire, at least 1), the fence counter]. */
export type QueuedRefusal = [number, string | null];

/** One request's scripts, each guarded by its ownerToken. */
export interface QueuedGrantSteps {
  /** Names the calls: 'semaphore', 'read-write'. */
  label: string;
  /**
   * The acquire script, called through `call` with `cancel`: the token when granted (a grant
   * already made for us is renewed), else a refusal, and when `channel` is given our place in the
   * queue is kept or refreshed. Throws for refusals of its own (a semaphore's other limit) after
   * the call, so that they are not taken for an outage.
   */
  acquire(channel: string, cancel: AbortSignal): Promise<string | QueuedRefusal>;
  /** Drops our grant or our place, and grants what that frees to the first waiters. */
  release(): Promise<unknown>;
  /** Extends our lease to ttlMs: false when it is gone. */
  renew(): Promise<boolean>;
}

/** The request as the queue sees it. */
export interface QueuedGrantRequest {
  name: string;
  ownerToken: string;
  ttlMs: number;
  wait: boolean;
}

/**
 * A request to a queue the scripts keep (the semaphore's and the read-write lock's): the first
 * attempt grants or, when waiting, queues us. A release grants the first waiters in its own script
 * and says so on the waiter's channel ("ownerToken token"), which the waiter takes without another
 * call; it polls only for leases that expire without a release (a dead holder), sleeping until the
 * soonest expiry, at most maxPollMs. A poll also finds a grant whose notice was lost. A request that
 * fails or is cancelled with a script maybe run leaves a guarded release to the provider's
 * leftovers, retried until Redis answers.
 */
export function requestQueuedGrant(
  client: QueuedGrantClient,
  req: QueuedGrantRequest,
  steps: QueuedGrantSteps,
  cancel: AbortSignal,
): Promise<OwnedLock | null> {
  return new QueuedRequest(client, req, steps).run(cancel);
}

/** One request: its attempts, its wait, and the grant it ends with. */
class QueuedRequest {
  readonly #client: QueuedGrantClient;
  readonly #req: QueuedGrantRequest;
  readonly #steps: QueuedGrantSteps;

  constructor(client: QueuedGrantClient, req: QueuedGrantRequest, steps: QueuedGrantSteps) {
    this.#client = client;
    this.#req = req;
    this.#steps = steps;
  }

  async run(cancel: AbortSignal): Promise<OwnedLock | null> {
    const [client, req, steps] = [this.#client, this.#req, this.#steps];
    const { leftovers } = client;
    const cleanUp = new CleanUpDue(leftovers, req.ownerToken);
    const channel = req.wait ? client.notices.channel : '';
    const attempt = () => cleanUp.attempt(steps.acquire(channel, cancel));
    const ear = req.wait
      ? new WaiterEar(client.notices, req.ownerToken, true, () => client.woken())
      : undefined;
    try {
      const sentAt = monotonicNow();
      const answer = await attempt();
      if (typeof answer === 'string') return this.#grant(BigInt(answer), sentAt);
      if (!ear) return null;
      return await this.#wait(ear, { answer, sentAt }, attempt, cancel);
    } catch (error) {
      // Outcome unknown (timed out, aborted): leave the queue and give back a grant made meanwhile.
      // The provider's leftovers own that clean-up and retry it until Redis answers.
      if (cleanUp.due) {
        leftovers.add(req.ownerToken, () => client.call(`${steps.label} leave`, () => steps.release()));
      }
      throw error;
    } finally {
      ear?.stop();
    }
  }

  /** Queued: waits for a notice or the next poll, whichever grants us first (run() stops the ear). */
  async #wait(
    ear: WaiterEar,
    first: { answer: QueuedRefusal; sentAt: number },
    attempt: () => Promise<string | QueuedRefusal>,
    cancel: AbortSignal,
  ): Promise<OwnedLock> {
    const [client, req] = [this.#client, this.#req];
    const { notices, maxPollMs } = client;
    const { inbox } = ear;
    inbox.refused(first.sentAt, refusalFence(first.answer));
    let untilExpiry = -first.answer[0];
    // Not subscribed yet: a notice sent before the subscription is lost, so look once more at once.
    let again = !notices.subscribed;
    const listening = ear.listen();
    // A handed grant lasts at least until our place in the queue would have lapsed (the release
    // script caps it there, so that a dead waiter holds nothing longer): until then we extend it.
    const provisionalMs = Math.min(req.ttlMs, client.waiterTtlMs);
    const takeHanded = (): OwnedLock | undefined => {
      // Taken while half of the provisional lease is left (extended at once past its third): a
      // waiter whose last poll is older would otherwise need a round trip more than one whose is
      // recent, and could be seen granted after a waiter queued behind it.
      const handed = inbox.handed(provisionalMs, provisionalMs / 2);
      return handed && this.#adoptHanded(handed, provisionalMs);
    };
    // Best effort: without notices the waiter still polls, so it waits for the subscription no
    // longer than one poll (a grant it cannot hear must be found by a poll before it lapses).
    // Already subscribed (every wait but a provider's first): no timer, no await.
    if (!notices.subscribed) {
      const subscribeMs = Math.min(client.callTimeoutMs, maxPollMs);
      await boundedCall('redis', 'subscribe', () => listening.subscribed, subscribeMs, cancel).catch(
        () => undefined, // best effort: the waiter polls without it
      );
    }
    const delays = jitteredDelays({ initialMs: maxPollMs / 2, maxMs: maxPollMs });
    for (;;) {
      if (cancel.aborted) throw cancel.reason;
      const taken = takeHanded();
      if (taken) return taken;
      // A notice that came while an attempt was in flight makes the next attempt start at once.
      if (!again && !inbox.noticed) {
        const sleep = sleepUnlessWoken(Math.min(Math.max(untilExpiry, 5), delays.next().value), cancel);
        ear.wake = sleep.wake;
        await sleep.done;
        const handedMeanwhile = takeHanded();
        if (handedMeanwhile) return handedMeanwhile;
      }
      again = false;
      inbox.noticed = false;
      const sentAt = monotonicNow();
      const answer = await attempt();
      if (typeof answer === 'string') return this.#grant(BigInt(answer), sentAt);
      untilExpiry = -answer[0];
      inbox.refused(sentAt, refusalFence(answer));
    }
  }

  #adoptHanded(handed: HandedGrant, provisionalMs: number): OwnedLock {
    const [client, req, steps] = [this.#client, this.#req, this.#steps];
    return extendHanded(this.#grant(handed.token, handed.sentAt, handed.rttMs), handed, {
      provisionalMs,
      ttlMs: req.ttlMs,
      driftRate: client.driftRate,
      renew: () => client.call(`${steps.label} renew`, () => steps.renew()),
    });
  }

  #grant(token: bigint, sentAt: number, rttMs?: number): OwnedLock {
    const [client, req, steps] = [this.#client, this.#req, this.#steps];
    const { call, leftovers } = client;
    return leasedLock({
      key: req.name,
      fencingToken: token,
      ownerToken: req.ownerToken,
      releaseOnBackend: async () => {
        const release = () => call(`${steps.label} release`, () => steps.release());
        await release().catch((error: unknown) => {
          leftovers.add(req.ownerToken, release); // guarded by ownerToken: retried until Redis answers
          throw error;
        });
      },
      ttlMs: req.ttlMs,
      driftRate: client.driftRate,
      grantedSentAt: sentAt,
      ...(rttMs === undefined ? {} : { grantedRttMs: rttMs }),
      renew: () => call(`${steps.label} renew`, () => steps.renew()),
    });
  }
}
