import { createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { guardSockets } from '../../src/ioredis-sockets.js';

// ioredis listens for its socket's 'error' once; a second error (a TLS reset after a refused
// handshake) ended the test process as an uncaught 'error' event. A socket of a guarded client
// has a listener of its own. A plain server that accepts and stays silent is all it takes.
let server: Server;
const sockets: Socket[] = [];
beforeAll(async () => {
  server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
});

it('a second error on a guarded client’s socket is not uncaught', async () => {
  const port = (server.address() as { port: number }).port;
  const redis = guardSockets(
    new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null }),
  );
  redis.on('error', () => undefined);
  try {
    const connected = new Promise((resolve) => redis.once('connect', resolve));
    redis.connect().catch(() => undefined);
    await connected;
    const stream = (redis as unknown as { stream: Socket }).stream;
    expect(stream).toBeDefined();
    // The first goes to ioredis's once-listener, the second to ours; unguarded, emit() throws.
    expect(() => {
      stream.emit('error', new Error('first'));
      stream.emit('error', new Error('second'));
    }).not.toThrow();
  } finally {
    redis.disconnect();
  }
});
