/** redis-semaphore's errors: acquire() ran out of time; a held lock or permit was lost. */
export class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

export class LostLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LostLockError';
  }
}
