import type { Redis } from 'ioredis';

/**
 * Release notices over pub/sub: one subscriber connection per provider, one subscription per
 * channel however many waiters listen on it. A lost notice only costs a waiter its next poll.
 */
export class ReleaseNotices {
  readonly #subscriber: Redis;
  readonly #listeners = new Map<string, Set<(message: string) => void>>();
  /** Channels nobody listens to any more, unsubscribed only after LINGER_MS: a busy name keeps its subscription. */
  readonly #idle = new Map<string, NodeJS.Timeout>();
  /** Channels whose SUBSCRIBE Redis has confirmed (and not yet undone). */
  readonly #confirmed = new Set<string>();

  constructor(redis: Redis) {
    this.#subscriber = redis.duplicate({ lazyConnect: true });
    this.#subscriber.on('error', () => undefined);
    this.#subscriber.on('message', (channel: string, message: string) => {
      for (const listener of this.#listeners.get(channel) ?? []) listener(message);
    });
  }

  /** Calls onMessage for each notice on channel until the returned function is called. */
  async listen(channel: string, onMessage: (message: string) => void): Promise<() => void> {
    clearTimeout(this.#idle.get(channel));
    this.#idle.delete(channel);
    let listeners = this.#listeners.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#listeners.set(channel, listeners);
      if (this.#subscriber.status === 'wait') await this.#subscriber.connect().catch(() => undefined);
      // Best effort: without the subscription the waiter still polls.
      await this.#subscriber.subscribe(channel).then(
        () => this.#listeners.get(channel) === listeners && this.#confirmed.add(channel),
        () => undefined,
      );
    }
    const set = listeners;
    set.add(onMessage);
    return () => {
      set.delete(onMessage);
      if (set.size > 0 || this.#listeners.get(channel) !== set || this.#idle.has(channel)) return;
      const timer = setTimeout(() => {
        this.#idle.delete(channel);
        if (this.#listeners.get(channel)?.size !== 0) return;
        this.#listeners.delete(channel);
        this.#confirmed.delete(channel);
        void this.#subscriber.unsubscribe(channel).catch(() => undefined);
      }, LINGER_MS);
      timer.unref();
      this.#idle.set(channel, timer);
    };
  }

  /**
   * Whether notices on channel already reach this client. A listener added in the same turn as a
   * command's reply then misses no notice published after that command: the notice arrives on the
   * subscriber connection as a later I/O event.
   */
  subscribed(channel: string): boolean {
    return this.#confirmed.has(channel) && this.#subscriber.status === 'ready';
  }

  close(): void {
    this.#confirmed.clear();
    for (const timer of this.#idle.values()) clearTimeout(timer);
    this.#idle.clear();
    this.#listeners.clear();
    this.#subscriber.disconnect();
  }
}

const LINGER_MS = 5_000;
