import type { Redis } from 'ioredis';

/**
 * Release notices over pub/sub, one channel per provider: a waiter queues with its provider's
 * channel, and a release publishes to the first waiter's channel only, so a notice reaches the one
 * client it is for (with a channel per name, every client waiting on the name would receive and
 * parse every notice). One subscriber connection, subscribed once. A lost notice only costs a
 * waiter its next poll.
 */
export class WaiterNotices {
  readonly channel: string;
  readonly #subscriber: Redis;
  /** ownerToken → the listener of that waiting request. */
  readonly #listeners = new Map<string, (message: string) => void>();
  #subscribing: Promise<void> | undefined;
  #subscribed = false;

  constructor(redis: Redis, prefix: string) {
    this.channel = `${prefix}inbox:${crypto.randomUUID()}`;
    this.#subscriber = redis.duplicate({ lazyConnect: true });
    this.#subscriber.on('error', () => undefined);
    this.#subscriber.on('message', (_channel: string, message: string) => {
      this.#listeners.get(message.split(' ', 1)[0] as string)?.(message);
    });
    // ioredis subscribes again after a reconnect; notices sent while it was away are lost (polls).
    this.#subscriber.on('close', () => {
      this.#subscribed = false;
    });
    this.#subscriber.on('ready', () => {
      if (this.#subscribing) this.#subscribed = true;
    });
  }

  /**
   * Calls onMessage for each notice to ownerToken until the returned function is called.
   * Resolves once the subscription is in place (best effort: without it the waiter still polls).
   */
  async listen(ownerToken: string, onMessage: (message: string) => void): Promise<() => void> {
    this.#listeners.set(ownerToken, onMessage);
    this.#subscribing ??= this.#subscribe();
    await this.#subscribing;
    return () => {
      this.#listeners.delete(ownerToken);
    };
  }

  /**
   * Whether notices already reach this client. A listener added in the same turn as a command's
   * reply then misses no notice published after that command: the notice arrives on the
   * subscriber connection as a later I/O event.
   */
  get subscribed(): boolean {
    return this.#subscribed && this.#subscriber.status === 'ready';
  }

  close(): void {
    this.#listeners.clear();
    this.#subscriber.disconnect();
  }

  async #subscribe(): Promise<void> {
    try {
      if (this.#subscriber.status === 'wait') await this.#subscriber.connect();
      await this.#subscriber.subscribe(this.channel);
      this.#subscribed = true;
    } catch {
      this.#subscribing = undefined; // the next waiter tries again
    }
  }
}
