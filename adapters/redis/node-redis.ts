import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';

/**
 * The part of a node-redis (`redis` v5/v6) client the provider uses. Typed by shape, so fencekit
 * needs no `redis` package of its own; a standalone client or a Sentinel client fits (node-redis's
 * cluster client sends commands by key, so pass an ioredis Cluster for Redis Cluster instead).
 */
export interface NodeRedisClient {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  sendCommand(args: ReadonlyArray<string>, options?: { timeout?: number }): Promise<unknown>;
  duplicate(): NodeRedisClient;
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  on(event: string, listener: (...args: never[]) => void): unknown;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
  destroy?(): void;
  disconnect?(): Promise<unknown>;
}

/** A node-redis client, told from an ioredis one (which has defineCommand and no isReady). */
export function isNodeRedisClient(client: unknown): client is NodeRedisClient {
  const c = client as Partial<NodeRedisClient> & { defineCommand?: unknown };
  return (
    typeof client === 'object' &&
    client !== null &&
    typeof c.sendCommand === 'function' &&
    typeof c.defineCommand !== 'function' &&
    'isReady' in c
  );
}

type Call = (...args: Array<string | number>) => Promise<unknown>;

/**
 * A node-redis client seen through the few ioredis members the provider calls: `status`, the
 * `error`/`ready`/`message` events, `defineCommand` (EVALSHA, EVAL on NOSCRIPT), `duplicate`,
 * `connect`, `subscribe`, `scan`, `quit`, `disconnect`. Replies come back in the same RESP2 shapes.
 */
class NodeRedisAsIoredis extends EventEmitter {
  /** node-redis emits 'ready' only once its handshake (HELLO or AUTH, SELECT) was answered. */
  readonly options = { enableReadyCheck: true };
  #connectCalled: boolean;

  constructor(
    readonly client: NodeRedisClient,
    readonly timeoutMs: number,
  ) {
    super();
    this.#connectCalled = client.isOpen;
    // node-redis throws an 'error' nobody listens to: the provider's listener must be on the client.
    client.on('error', (error: never) => this.emit('error', error));
    client.on('ready', () => this.emit('ready'));
  }

  get status(): string {
    if (this.client.isReady) return 'ready';
    if (this.client.isOpen) return 'reconnecting';
    return this.#connectCalled ? 'end' : 'wait';
  }

  defineCommand(name: string, { numberOfKeys, lua }: { numberOfKeys: number; lua: string }): void {
    const sha = createHash('sha1').update(lua).digest('hex');
    const call: Call = async (...args) => {
      const rest = [String(numberOfKeys), ...args.map(String)];
      try {
        return await this.client.sendCommand(['EVALSHA', sha, ...rest], { timeout: this.timeoutMs });
      } catch (error) {
        if (!String((error as Error)?.message).startsWith('NOSCRIPT')) throw error;
        return this.client.sendCommand(['EVAL', lua, ...rest], { timeout: this.timeoutMs });
      }
    };
    (this as unknown as Record<string, Call>)[name] = call;
  }

  /** SCAN cursor MATCH pattern COUNT n, for list(): replies [cursor, keys] as ioredis does. */
  scan(...args: Array<string | number>): Promise<unknown> {
    return this.client.sendCommand(['SCAN', ...args.map(String)], { timeout: this.timeoutMs });
  }

  duplicate(): Redis {
    return asIoredis(this.client.duplicate(), this.timeoutMs);
  }

  async connect(): Promise<void> {
    this.#connectCalled = true;
    await this.client.connect();
  }

  async subscribe(channel: string): Promise<void> {
    await this.client.subscribe(channel, (message, from) => this.emit('message', from, message));
  }

  async quit(): Promise<void> {
    await (this.client.close ? this.client.close() : this.client.quit?.());
  }

  disconnect(): void {
    this.#connectCalled = true;
    try {
      if (this.client.destroy) this.client.destroy();
      else void this.client.disconnect?.().catch(() => undefined);
    } catch {
      // already closed: nothing left to cut
    }
  }
}

/** The node-redis client as the provider's ioredis-typed connection (only the members above are used). */
export function asIoredis(client: NodeRedisClient, timeoutMs: number): Redis {
  return new NodeRedisAsIoredis(client, timeoutMs) as unknown as Redis;
}
