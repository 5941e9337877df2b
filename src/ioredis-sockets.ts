import type { EventEmitter } from 'node:events';

/**
 * ioredis listens for its socket's 'error' with `once`: a second error on one socket (a TLS
 * connection reset after the server refused the handshake, seen in tests of refused client
 * certificates) finds no listener, and an 'error' event without one ends the process. Every socket
 * ioredis gives this client gets a listener of its own (the error itself reaches ioredis's handler
 * through the first). For the clients fencekit makes; an app's own client is left as it is.
 */
export function guardSockets<T extends object>(redis: T): T {
  let stream: unknown;
  Object.defineProperty(redis, 'stream', {
    configurable: true,
    enumerable: true,
    get: () => stream,
    set: (value: unknown) => {
      stream = value;
      (value as Partial<EventEmitter> | undefined)?.on?.('error', () => undefined);
    },
  });
  // A Cluster makes a client per node: each is guarded as it joins.
  (redis as Partial<EventEmitter>).on?.('+node', (node: object) => guardSockets(node));
  return redis;
}
