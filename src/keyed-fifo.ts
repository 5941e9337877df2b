/**
 * In-process FIFO exclusion per key. Backends whose grant belongs to a session or connection rather
 * than to a request (etcd: one key per lease; PostgreSQL: advisory locks are re-entrant per
 * connection) would let two acquires of one name inside one provider both win; this queue makes
 * them take turns before they reach the backend.
 */
export class KeyedFifo {
  readonly #queues = new Map<string, Array<() => void>>();

  /** Resolves with a leave() function when it is this caller's turn; rejects if cancel aborts first. */
  enter(key: string, cancel: AbortSignal): Promise<() => void> {
    let queue = this.#queues.get(key);
    if (!queue) {
      queue = [];
      this.#queues.set(key, queue);
    }
    const line = queue;
    return new Promise((resolve, reject) => {
      let left = false;
      const leave = () => {
        if (left) return;
        left = true;
        line.shift();
        if (line.length > 0) (line[0] as () => void)();
        else this.#queues.delete(key);
      };
      const turn = () => {
        cancel.removeEventListener('abort', onAbort);
        resolve(leave);
      };
      const onAbort = () => {
        const index = line.indexOf(turn);
        if (index > 0) line.splice(index, 1);
        reject(cancel.reason);
      };
      line.push(turn);
      if (line.length === 1) {
        turn();
        return;
      }
      if (cancel.aborted) return onAbort();
      cancel.addEventListener('abort', onAbort, { once: true });
    });
  }
}
