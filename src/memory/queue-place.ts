/**
 * A request's place in an in-process server's FIFO queue: `granted` resolves with its lease when
 * the server hands it over; `cancel()` leaves the queue, false once the grant was made (then the
 * lease is the caller's to give back).
 */
export interface QueuePlace<L> {
  granted: Promise<L>;
  cancel: () => boolean;
}

/**
 * Puts a waiter at the end of `queue`: `waiter` builds it around the callback that grants it.
 * `left(index)` runs after a cancel took it out from `index`.
 */
export function joinQueue<W, L>(
  queue: W[],
  waiter: (granted: (lease: L) => void) => W,
  left: (index: number) => void,
): QueuePlace<L> {
  let queued!: W;
  const granted = new Promise<L>((resolve) => {
    queued = waiter(resolve);
  });
  queue.push(queued);
  const cancel = () => {
    const index = queue.indexOf(queued);
    if (index < 0) return false;
    queue.splice(index, 1);
    left(index);
    return true;
  };
  return { granted, cancel };
}

/**
 * Waits for a place's grant until `cancel` aborts. A grant made while cancelling goes straight
 * back through `giveBack`, which may throw (a partitioned client's release is refused: the lease,
 * never renewed, runs out), so nothing is left behind.
 */
export function awaitGrant<L>(
  place: QueuePlace<L>,
  cancel: AbortSignal,
  giveBack: (raced: L) => void,
): Promise<L> {
  return new Promise<L>((resolve, reject) => {
    const onCancel = () => {
      if (!place.cancel()) {
        place.granted.then(giveBack).catch(() => undefined); // a refused release: the lease runs out
      }
      reject(cancel.reason);
    };
    if (cancel.aborted) return onCancel();
    cancel.addEventListener('abort', onCancel, { once: true });
    void place.granted.then((lease) => {
      cancel.removeEventListener('abort', onCancel);
      resolve(lease);
    });
  });
}
