import { Cluster, type Redis, type RedisOptions } from 'ioredis';
import { guardSockets } from '../../src/ioredis-sockets.js';

/**
 * Release notices over pub/sub, one channel per provider: a waiter queues with its provider's
 * channel, and a release publishes to the first waiter's channel only, so a notice reaches the one
 * client it is for (with a channel per name, every client waiting on the name would receive and
 * parse every notice). One subscriber connection, subscribed once. A lost notice only costs a
 * waiter its next poll.
 */
export class WaiterNotices {
  readonly channel: string;
  readonly #subscriber: Redis | Cluster;
  /** ownerToken → the listener of that waiting request. */
  readonly #listeners = new Map<string, (message: string) => void>();
  #subscribing: Promise<void> | undefined;
  /** Redis confirmed the first SUBSCRIBE; ioredis subscribes again by itself after a reconnect. */
  #subscribed = false;

  constructor(redis: Redis | Cluster, prefix: string, options: RedisOptions = {}) {
    this.channel = `${prefix}inbox:${crypto.randomUUID()}`;
    // A Cluster delivers PUBLISH to every node: a subscriber on any of them hears it.
    this.#subscriber = guardSockets(
      redis instanceof Cluster
        ? redis.duplicate([], { lazyConnect: true })
        : redis.duplicate({ ...options, lazyConnect: true }),
    );
    this.#subscriber.on('error', () => undefined);
    this.#subscriber.on('message', (_channel: string, message: string) => {
      this.#listeners.get(message.split(' ', 1)[0] as string)?.(message);
    });
  }

  /**
   * Calls onMessage for each notice to ownerToken until `stop` is called. `subscribed` settles once
   * the subscription is in place or failed (best effort: without it the waiter still polls); the
   * caller bounds how long it waits for it.
   */
  listen(
    ownerToken: string,
    onMessage: (message: string) => void,
  ): { subscribed: Promise<void>; stop: () => void } {
    this.#listeners.set(ownerToken, onMessage);
    this.#subscribing ??= this.#subscribe();
    return {
      subscribed: this.#subscribing,
      stop: () => {
        // Only its own: a later request with the same ownerToken (a retry) keeps its listener.
        if (this.#listeners.get(ownerToken) === onMessage) this.#listeners.delete(ownerToken);
      },
    };
  }

  /**
   * Whether notices already reach this client. A listener added in the same turn as a command's
   * reply then misses no notice published after that command: the notice arrives on the
   * subscriber connection as a later I/O event. (Right after a reconnect ioredis reports ready
   * before its new SUBSCRIBE is answered: a notice lost then costs the waiter a poll.)
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
