import type pg from 'pg';
import { BackendUnavailableError } from '../../src/errors.js';
import { authenticationError, whereOf } from '../../src/postgres-refusal.js';
import { within } from './deadline.js';

/** What a raw pg client exposes that the pool's types hide: its server pid and its socket. */
interface ClientInternals {
  processID: number;
  connection?: { stream?: { destroy(): void } };
}

/**
 * One pooled connection while fencekit has it checked out. It goes back exactly once, whatever
 * order cancel, grant and errors arrive in (pg-pool throws on a second release, from wherever
 * that happens to run). While checked out it listens for the socket's death, which would
 * otherwise be an 'error' event nobody handles.
 */
export class Checkout {
  #done = false;
  #broken = false;
  readonly #lostListeners: Array<() => void> = [];

  constructor(
    readonly client: pg.PoolClient,
    /** Runs once, after the connection went back or was destroyed (frees the caller's slot). */
    private readonly onDone: () => void = () => undefined,
  ) {
    client.on('error', this.#onLost);
    client.on('end', this.#onLost);
  }

  /** The server process serving this connection. */
  get pid(): number {
    return (this.client as unknown as ClientInternals).processID;
  }

  get done(): boolean {
    return this.#done;
  }

  /** Runs once if the connection dies while checked out. */
  onLost(listener: () => void): void {
    if (this.#broken) listener();
    else this.#lostListeners.push(listener);
  }

  /**
   * A query that settles within timeoutMs or rejects with BackendUnavailableError; on that
   * deadline or an abort the connection is destroyed: its state is unknown, and closing it is what
   * makes the server drop whatever it was doing for us (a queued lock wait, a held lock).
   */
  async query<R extends pg.QueryResultRow>(
    text: string,
    values: unknown[],
    timeoutMs: number,
    what: string,
    signal?: AbortSignal,
  ): Promise<pg.QueryResult<R>> {
    try {
      return await within(this.client.query<R>(text, values), timeoutMs, what, signal);
    } catch (error) {
      this.discard();
      throw error;
    }
  }

  /** Back to the pool for reuse (or destroyed, if it broke meanwhile). */
  giveBack(): void {
    this.#finish(this.#broken);
  }

  /** Closes the connection at once; the server then releases its session locks. */
  discard(): void {
    this.#finish(true);
  }

  #finish(destroy: boolean): void {
    if (this.#done) return;
    this.#done = true;
    // The pool puts its own error listener back inside release(): only then drop ours.
    this.client.release(destroy);
    this.client.off('error', this.#onLost);
    this.client.off('end', this.#onLost);
    if (destroy) (this.client as unknown as ClientInternals).connection?.stream?.destroy();
    this.onDone();
  }

  readonly #onLost = () => {
    if (this.#broken) return;
    this.#broken = true;
    for (const listener of this.#lostListeners.splice(0)) listener();
  };
}

/**
 * A connection from `pool` within timeoutMs, or BackendUnavailableError; cancel aborts the wait
 * with its reason. One that arrives after the caller gave up goes straight back.
 */
export function checkOut(
  pool: pg.Pool,
  timeoutMs: number,
  cancel?: AbortSignal,
  onDone?: () => void,
): Promise<Checkout> {
  let gaveUp = false;
  const connecting = new Promise<Checkout>((resolve, reject) => {
    // The callback form, not the promise: the Checkout's error listener must be on before the
    // socket's next message is parsed. A backend terminated right after its first ReadyForQuery
    // sends that and a FATAL ErrorResponse in one chunk; pg-pool has dropped its own listener when
    // it hands the client over, so a listener added a promise step later is too late and the
    // 'error' event, with nobody listening, ends the process (seen under pg_terminate_backend).
    // pg reads the connection string when it makes a client, and throws at once when it cannot.
    pool.connect((error, client) => {
      if (error || !client) {
        reject(error ?? new Error('no client'));
        return;
      }
      const checkout = new Checkout(client, onDone);
      if (gaveUp) checkout.giveBack();
      resolve(checkout);
    });
  }).catch((error: unknown) => {
    onDone?.();
    const refused = authenticationError(error, whereOf(pool.options));
    if (refused) throw refused;
    throw new BackendUnavailableError(`postgres: cannot connect: ${(error as Error).message}`, {
      cause: error,
    });
  });
  return within(connecting, timeoutMs, 'connecting', cancel).catch((error: unknown) => {
    gaveUp = true;
    // Already connected (the rejection came from elsewhere in the same turn): give it back now.
    void connecting.then(
      (c) => c.giveBack(),
      () => undefined,
    );
    throw error;
  });
}
