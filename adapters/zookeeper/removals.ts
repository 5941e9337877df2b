import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { monotonicNow } from '../../src/clock.js';
import type { CallOptions, ZkClient } from './wire/client.js';
import { zkCode } from './wire/codes.js';

/** What the removals need from the session that owns them. */
export interface RemovalOwner {
  readonly client: ZkClient;
  /** Aborts when the session ends: its ephemeral nodes go with it, and the removals stop. */
  readonly signal: AbortSignal;
  /** Deadline of each attempt. */
  readonly callTimeoutMs: number;
  /** The session timeout the server granted: how long a removal may stay unconfirmed. */
  sessionTimeoutMs(): number;
  /** Ends the session (the server then deletes every ephemeral node of it). */
  end(): void;
}

/**
 * The deletions of nodes a session created (released grants, cancelled or refused requests,
 * creates whose answer was lost): a node given to them is gone once its removal settles, deleted
 * as the server confirmed, or with the session. One retry loop with one rule, as Curator's
 * guaranteed delete and etcd's EtcdSession.remove: each removal is tried with jittered backoff
 * until the server confirms it or the session ends, and one that cannot be confirmed within a
 * session timeout ends the session, whose ephemeral nodes the server then deletes (at its expiry
 * at the latest, should the close go unanswered). So no node of ours keeps its name locked while
 * the provider stays open. Curator's
 * guaranteed delete differs there: it retries in the background for as long as its client runs.
 * Never rejects: whoever asked may go away, the session owns the removal.
 */
export class SessionRemovals {
  readonly #owner: RemovalOwner;
  /** Removals under way, by what they remove: a second request for the same joins the first. */
  readonly #pending = new Map<string, Promise<boolean>>();

  constructor(owner: RemovalOwner) {
    this.#owner = owner;
  }

  /** Deletes the node at path (any version: the path is our request's own); true once confirmed. */
  remove(path: string): Promise<boolean> {
    return this.#once(path, (call) => deleteNode(this.#owner.client, path, call));
  }

  /**
   * Deletes the nodes under parent whose names start with prefix (our request's uuid: nobody
   * else's) after a create whose outcome is unknown. Each attempt lists again: the server answers
   * a session's calls in order, so a listing answered after the create shows what it made.
   */
  removeMatching(parent: string, prefix: string): Promise<boolean> {
    return this.#once(`${parent}/${prefix}*`, (call) =>
      deleteMatching(this.#owner.client, { parent, prefix }, call),
    );
  }

  /** What is still being removed (paths, and `parent/prefix*` for matching removals). */
  get pending(): string[] {
    return [...this.#pending.keys()];
  }

  #once(what: string, attempt: (call: CallOptions) => Promise<void>): Promise<boolean> {
    const running = this.#pending.get(what);
    if (running) return running;
    const removal = this.#untilConfirmed(attempt).finally(() => this.#pending.delete(what));
    this.#pending.set(what, removal);
    return removal;
  }

  /**
   * Retries the attempt until it succeeds (true) or the session ends (false); waits 50 ms to 1 s
   * between tries (jittered); gives up one session timeout after the start (after one last whole
   * try), ending the session.
   */
  async #untilConfirmed(attempt: (call: CallOptions) => Promise<void>): Promise<boolean> {
    const { signal } = this.#owner;
    const giveUpAt = monotonicNow() + this.#owner.sessionTimeoutMs();
    const delays = jitteredDelays({ initialMs: 50, maxMs: 1_000 });
    while (!signal.aborted) {
      const left = giveUpAt - monotonicNow();
      if (left <= 0) {
        // One last try, whole: a connection back just as the time ran out confirms it, and the
        // session (and every lock on it) goes on.
        const last = attempt({ timeoutMs: this.#owner.callTimeoutMs, signal });
        if (
          await last.then(
            () => true,
            () => false,
          )
        )
          return true;
        this.#owner.end(); // unconfirmed: the session's end removes the node on the server
        return false;
      }
      try {
        await attempt({ timeoutMs: Math.min(this.#owner.callTimeoutMs, left), signal });
        return true;
      } catch {
        // Not confirmed (timed out, connection lost, refused): try again until the deadline.
      }
      const pause = Math.max(0, Math.min(delays.next().value, giveUpAt - monotonicNow()));
      const slept = await sleepUnlessWoken(pause, signal).done.catch(() => 'ended' as const);
      if (slept === 'ended') return false; // the session ended: its nodes went with it
    }
    return false;
  }
}

/** One delete of path, any version; a node already gone (NO_NODE) counts as deleted. */
async function deleteNode(client: ZkClient, path: string, call: CallOptions): Promise<void> {
  try {
    await client.delete(path, -1, call);
  } catch (error) {
    if (zkCode(error) !== 'NO_NODE') throw error;
  }
}

/** One listing of parent, then a delete of each child named prefix…; a folder gone holds none. */
async function deleteMatching(
  client: ZkClient,
  where: { parent: string; prefix: string },
  call: CallOptions,
): Promise<void> {
  let children: string[];
  try {
    children = await client.getChildren(where.parent, call);
  } catch (error) {
    if (zkCode(error) === 'NO_NODE') return;
    throw error;
  }
  const ours = children.filter((name) => name.startsWith(where.prefix));
  await Promise.all(ours.map((name) => deleteNode(client, `${where.parent}/${name}`, call)));
}
