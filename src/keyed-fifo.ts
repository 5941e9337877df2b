/**
 * In-process FIFO exclusion per key. Backends whose grant belongs to a session or connection rather
 * than to a request (etcd: one key per lease; PostgreSQL: advisory locks are re-entrant per
 * connection) would let two acquires of one name inside one provider both win; this queue makes
 * them take turns before they reach the backend. PostgreSQL also lines up its waiters here, so that
 * only the first waiter of a name holds a connection while it waits.
 */
export class KeyedFifo {
  /** Per key: the current holder's marker first, then the waiters' turn callbacks. */
  readonly #lines = new Map<string, Array<() => void>>();

  /** The turn at once, or null when someone in this process has it or waits for it (never waits). */
  tryEnter(key: string): (() => void) | null {
    const line = this.#lines.get(key);
    if (line && line.length > 0) return null;
    const fresh = [HOLDER];
    this.#lines.set(key, fresh);
    return this.#leaver(key, fresh);
  }

  /** How many callers wait behind the one whose turn it is (0 when nobody has the key). */
  behind(key: string): number {
    return Math.max(0, (this.#lines.get(key)?.length ?? 0) - 1);
  }

  /** Resolves with a leave() function when it is this caller's turn; rejects if cancel aborts first. */
  enter(key: string, cancel: AbortSignal): Promise<() => void> {
    let line = this.#lines.get(key);
    if (!line) {
      line = [];
      this.#lines.set(key, line);
    }
    if (line.length === 0) {
      line.push(HOLDER);
      return Promise.resolve(this.#leaver(key, line));
    }
    const queue = line;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const index = queue.indexOf(turn);
        if (index > 0) queue.splice(index, 1);
        reject(cancel.reason);
      };
      const turn = () => {
        cancel.removeEventListener('abort', onAbort);
        queue[0] = HOLDER; // keep nothing of the request (its signal) while the turn lasts
        resolve(this.#leaver(key, queue));
      };
      if (cancel.aborted) {
        reject(cancel.reason);
        return;
      }
      queue.push(turn);
      cancel.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Runs `request` in `key`'s turn and keeps the turn for as long as its grant lasts: the turn ends
   * when the request fails or grants nothing, else when the grant ends (released or lost). A
   * request that must not `wait` does not line up behind anyone in this process: null then.
   */
  async grantInTurn<Grant extends { onEnd(listener: () => void): void }>(
    key: string,
    wait: boolean,
    cancel: AbortSignal,
    request: () => Promise<Grant | null>,
  ): Promise<Grant | null> {
    const leave = this.tryEnter(key) ?? (wait ? await this.enter(key, cancel) : null);
    if (!leave) return null;
    let grant: Grant | null;
    try {
      grant = await request();
    } catch (error) {
      leave();
      throw error;
    }
    if (grant) grant.onEnd(leave);
    else leave();
    return grant;
  }

  /**
   * Runs `request` in `key`'s turn, which ends as soon as the request settles, granted or not: the
   * next caller's request then waits in the backend while the grant is held, so the backend sees at
   * most one waiting request per key from this process, however many wait here. A request that
   * must not `wait` does not line up behind anyone in this process: null then.
   */
  async requestInTurn<Grant>(
    key: string,
    wait: boolean,
    cancel: AbortSignal,
    request: () => Promise<Grant | null>,
  ): Promise<Grant | null> {
    const leave = this.tryEnter(key) ?? (wait ? await this.enter(key, cancel) : null);
    if (!leave) return null;
    try {
      return await request();
    } finally {
      leave();
    }
  }

  #leaver(key: string, line: Array<() => void>): () => void {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      line.shift();
      const next = line[0];
      if (next) next();
      else this.#lines.delete(key);
    };
  }
}

const HOLDER = (): void => undefined;
