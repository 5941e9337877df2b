import type { Cluster, Redis } from 'ioredis';
import { callWithin } from '../../src/deadline.js';
import { AuthenticationError, BackendUnavailableError } from '../../src/errors.js';
import { redisRefusal } from '../../src/redis-refusal.js';

/**
 * Whether one ioredis client is known to be unreachable: its latest connection attempt failed
 * (nothing listening, host unreachable) and no connection is ready since. A call then fails at
 * once instead of waiting in ioredis's offline queue for a server that is not there.
 */
export class Reachability {
  #failure: Error | undefined;
  /** The last refusal of our identity (a password, a certificate) since a connection was ready. */
  #refused: Error | undefined;
  /** The code of the last connection error (ECONNRESET …). */
  #lastCode: string | undefined;
  #everReady = false;
  /** The wait for a doubtful failure's verdict, shared by the calls that failed meanwhile. */
  #verdict: Promise<void> | undefined;

  /** Who is asked: the backend's name ('redis', 'redlock') and the client's host:port. */
  readonly peer: Peer;

  constructor(
    readonly redis: Redis | Cluster,
    readonly label: string,
    backend: 'redis' | 'redlock' = 'redis',
  ) {
    this.peer = { backend, host: hostOf(redis) };
    redis.on('error', (error: Error) => {
      // An error on a live connection (a reset) is not yet unreachable: the reconnect may succeed.
      if (redis.status !== 'ready') this.#failure = error;
      // A call's own failure (ioredis's retry limit) has no code: the connection's last one stays.
      this.#lastCode = (error as NodeJS.ErrnoException).code ?? this.#lastCode;
      // A refused identity stays the reason through the resets and retry-limit errors that follow
      // it, until a connection is ready or nothing listens any more.
      if (redisRefusal(error) !== undefined) this.#refused = error;
      else if ((error as NodeJS.ErrnoException).code === 'ECONNREFUSED') this.#refused = undefined;
    });
    redis.on('ready', () => {
      this.#failure = undefined;
      this.#refused = undefined;
      this.#everReady = true;
    });
  }

  /**
   * Calls `then` once, as soon as a connection is ready (at once if one is). A backend that
   * accepted a connection and answered its ready check (credentials included) was reached: an
   * answer lost after that is an outage, not a wrong address or password. Without the ready check,
   * "ready" comes before the server judged the credentials: never called then (the first answered
   * call counts instead).
   */
  onceConnected(then: () => void): void {
    if (!readyCheckOn(this.redis)) return;
    if (this.redis.status === 'ready') then();
    else this.redis.once('ready', then);
  }

  /**
   * The AuthenticationError a failed call stands for: the call's own error is a refusal (a wrong
   * password, an ACL), or no connection is ready because the last attempt was refused (a
   * certificate: ioredis then fails the call with a retry-limit error of its own).
   */
  refusal(error: unknown): AuthenticationError | undefined {
    return (
      refusalError(this.peer, error) ?? (this.connected ? undefined : refusalError(this.peer, this.#refused))
    );
  }

  /**
   * Whether a failed call may yet prove a refusal: a TLS client that never had a connection ready,
   * whose handshakes were reset. A server refusing our certificate under TLS 1.3 often resets the
   * connection before its alert arrives; a later attempt usually brings the alert.
   */
  #doubtful(error: unknown): boolean {
    const options = this.redis.options as { tls?: unknown; redisOptions?: { tls?: unknown } } | undefined;
    const tls = Boolean(options?.tls ?? options?.redisOptions?.tls);
    return tls && !this.#everReady && this.refusal(error) === undefined && this.#lastCode === 'ECONNRESET';
  }

  /**
   * refusal(error), after waiting up to waitMs for the verdict where the failure is doubtful (see
   * #doubtful): the next refusal or a ready connection ends the wait.
   */
  async settledRefusal(error: unknown, waitMs: number): Promise<AuthenticationError | undefined> {
    if (!this.#doubtful(error)) return this.refusal(error);
    // One wait for every call that fails meanwhile (one listener pair, however many calls).
    this.#verdict ??= new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.redis.off('error', onError);
        this.redis.off('ready', done);
        resolve();
      };
      const onError = (e: Error) => {
        if (redisRefusal(e) !== undefined) done();
      };
      const timer = setTimeout(done, waitMs);
      timer.unref(); // a wait for a verdict keeps no process alive
      this.redis.on('error', onError);
      this.redis.on('ready', done);
    }).finally(() => {
      this.#verdict = undefined;
    });
    await this.#verdict;
    return this.refusal(error);
  }

  /** Whether a connection is ready (not while connecting, reconnecting or never connected). */
  get connected(): boolean {
    return this.redis.status === 'ready';
  }

  /** False while the last connection attempt failed and none is ready. */
  get reachable(): boolean {
    return !(this.#failure && this.redis.status !== 'ready');
  }

  /** Throws BackendUnavailableError when the last connection attempt failed (nothing is sent then). */
  check(what: string): void {
    const failure = this.#failure;
    if (failure && !this.reachable) {
      const refused = this.refusal(failure);
      if (refused) {
        notSent.add(refused);
        throw refused;
      }
      const error = new BackendUnavailableError(
        `${this.label}: ${what}: cannot connect: ${failure.message}`,
        {
          cause: failure,
        },
      );
      notSent.add(error);
      throw error;
    }
  }
}

/** Whether ioredis checks a connection (AUTH answered, INFO loading: 0) before calling it ready. */
function readyCheckOn(redis: Redis | Cluster): boolean {
  const options = redis.options as
    | { enableReadyCheck?: boolean; redisOptions?: { enableReadyCheck?: boolean } }
    | undefined;
  // A client that does not say is not trusted: its first answered call counts instead.
  if (!options) return false;
  return options.enableReadyCheck !== false && options.redisOptions?.enableReadyCheck !== false;
}

/** The backend and host an AuthenticationError names. */
export interface Peer {
  backend: 'redis' | 'redlock';
  host: string;
}

/** host:port of a client (a Cluster: its seed nodes), for errors; never its credentials. */
function hostOf(redis: Redis | Cluster): string {
  const options = redis.options as { host?: string; port?: number } | undefined;
  const seeds = (redis as { startupNodes?: Array<string | number | { host?: string; port?: number }> })
    .startupNodes;
  if (Array.isArray(seeds) && seeds.length > 0) {
    return seeds
      .map((node) =>
        typeof node === 'object' ? `${node.host ?? '127.0.0.1'}:${node.port ?? 6379}` : String(node),
      )
      .join(',');
  }
  return options?.host === undefined ? 'the server' : `${options.host}:${options.port ?? 6379}`;
}

/** An AuthenticationError for a refusal (see redisRefusal), else undefined. */
export function refusalError(peer: Peer | undefined, error: unknown): AuthenticationError | undefined {
  if (error instanceof AuthenticationError) return error;
  const why = redisRefusal(error);
  if (why === undefined) return undefined;
  return new AuthenticationError(peer?.backend ?? 'redis', peer?.host ?? 'the server', why, { cause: error });
}

const notSent = new WeakSet<object>();

/** Whether a call failed before anything was sent (so there is nothing to clean up after it). */
export function wasNotSent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && notSent.has(error);
}

/**
 * Runs one backend call with a deadline and a cancellation path (callWithin): rejects with
 * BackendUnavailableError when `run` fails or has not answered after timeoutMs (AuthenticationError
 * when the server refused who we are), and with cancel.reason as soon as `cancel` aborts; `run` is
 * not called when `cancel` has already aborted. The call itself may still complete later (its
 * outcome is then unknown): callers that changed state clean up after any rejection.
 */
export function boundedCall<T>(
  label: string,
  what: string,
  run: () => Promise<T>,
  timeoutMs: number,
  cancel?: AbortSignal,
  /** Who is asked: a refusal of our identity by it is an AuthenticationError. */
  peer?: Peer | Reachability,
): Promise<T> {
  // A started promise, not a function: ioredis takes no signal, and deriving one for every command
  // would cost more than the command's own client work. So the cancel check before sending is here.
  if (cancel?.aborted) return Promise.reject(cancel.reason);
  const answer = answerOf(run, label, what, performance.now() + timeoutMs, peer);
  return callWithin(answer, { timeoutMs, signal: cancel, what, backend: label });
}

/** How long before the call's deadline a wait for a refusal's verdict gives up (so the answer is its own). */
const VERDICT_MARGIN_MS = 100;

/**
 * `run`'s answer, its failure as the error boundedCall promises. A doubtful failure waits for its
 * verdict first, until just before the call's `deadline` (callWithin's timer still runs): a busy
 * machine can take seconds to bring a refused certificate's alert.
 */
async function answerOf<T>(
  run: () => Promise<T>,
  label: string,
  what: string,
  deadline: number,
  peer: Peer | Reachability | undefined,
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (peer instanceof Reachability) {
      await peer.settledRefusal(error, Math.max(0, deadline - performance.now() - VERDICT_MARGIN_MS));
    }
    if (error instanceof BackendUnavailableError) throw error;
    throw (
      (peer instanceof Reachability ? peer.refusal(error) : refusalError(peer, error)) ??
      new BackendUnavailableError(`${label}: ${what} failed: ${(error as Error).message}`, { cause: error })
    );
  }
}
