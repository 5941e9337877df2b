/** redis-semaphore's errors: acquire() ran out of time; a held lock or permit was lost. */
export class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/** redis-semaphore's error for a held lock or permit that was lost (given to `onLockLost`). */
export class LostLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LostLockError';
  }
}
