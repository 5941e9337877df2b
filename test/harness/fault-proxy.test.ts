import net from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

/** A loopback echo server: the simplest peer whose every byte we can account for. */
async function echoServer(): Promise<net.Server> {
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** Sends text and resolves with the echo and the round-trip time; rejects after timeoutMs. */
function roundTrip(
  socket: net.Socket,
  text: string,
  timeoutMs = 2_000,
): Promise<{ echo: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let echo = '';
    const timer = setTimeout(() => {
      socket.off('data', onData);
      reject(new Error('timed out'));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      echo += chunk;
      if (echo.length >= text.length) {
        clearTimeout(timer);
        socket.off('data', onData);
        resolve({ echo, ms: performance.now() - started });
      }
    };
    socket.on('data', onData);
    socket.write(text);
  });
}

async function connectTo(port: number): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return socket;
}

describe('fault proxy', () => {
  let echo: net.Server;
  let proxy: FaultProxy;
  beforeAll(async () => {
    echo = await echoServer();
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: (echo.address() as net.AddressInfo).port });
  });
  afterAll(async () => {
    await proxy?.close();
    await new Promise((r) => echo?.close(r));
  });

  it('passes traffic through unchanged', async () => {
    const socket = await connectTo(proxy.port);
    expect((await roundTrip(socket, 'hello')).echo).toBe('hello');
    socket.destroy();
  });

  it('adds latency each way, in order', async () => {
    const socket = await connectTo(proxy.port);
    proxy.setMode({ kind: 'latency', ms: 100 });
    const { echo: text, ms } = await roundTrip(socket, 'abc');
    expect(text).toBe('abc');
    expect(ms).toBeGreaterThanOrEqual(195); // 100 ms to the server, 100 ms back
    proxy.setMode({ kind: 'pass' });
    expect((await roundTrip(socket, 'fast')).echo).toBe('fast');
    socket.destroy();
  });

  it('blackhole: the connection stays open but the client times out', async () => {
    const socket = await connectTo(proxy.port);
    proxy.setMode({ kind: 'blackhole' });
    await expect(roundTrip(socket, 'lost', 300)).rejects.toThrow('timed out');
    expect(socket.destroyed).toBe(false);
    proxy.setMode({ kind: 'pass' });
    socket.destroy();
  });

  it('partition: bytes are held, not dropped, and delivered in order on heal', async () => {
    const socket = await connectTo(proxy.port);
    proxy.setMode({ kind: 'partition' });
    const reply = roundTrip(socket, 'held-1', 3_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(socket.destroyed).toBe(false);
    let early = '';
    socket.once('data', (chunk) => {
      early = chunk.toString();
    });
    proxy.setMode({ kind: 'pass' });
    const { echo: text, ms } = await reply;
    expect(text).toBe('held-1');
    expect(ms).toBeGreaterThanOrEqual(295);
    expect(early.startsWith('held-1')).toBe(true);
    // The connection is in step after the heal: the next reply is the next request's.
    expect((await roundTrip(socket, 'next')).echo).toBe('next');
    socket.destroy();
  });

  it('blackhole: healing resets a connection that lost bytes, so no reply comes out of step', async () => {
    const socket = await connectTo(proxy.port);
    const reset = new Promise<string | undefined>((resolve) =>
      socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code)),
    );
    proxy.setMode({ kind: 'blackhole' });
    await expect(roundTrip(socket, 'dropped', 200)).rejects.toThrow('timed out');
    proxy.setMode({ kind: 'pass' });
    expect(await reset).toBe('ECONNRESET');
  });

  it('delay one way: requests arrive at once, replies late', async () => {
    const socket = await connectTo(proxy.port);
    proxy.setMode({ kind: 'delay', direction: 'toClient', ms: 150 });
    const { echo: text, ms } = await roundTrip(socket, 'late');
    expect(text).toBe('late');
    expect(ms).toBeGreaterThanOrEqual(145);
    proxy.setMode({ kind: 'pass' });
    socket.destroy();
  });

  it('cutAll resets every open connection', async () => {
    const sockets = [await connectTo(proxy.port), await connectTo(proxy.port)];
    const closed = sockets.map(
      (s) =>
        new Promise<string | undefined>((resolve) =>
          s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code)),
        ),
    );
    proxy.cutAll();
    expect(await Promise.all(closed)).toEqual(['ECONNRESET', 'ECONNRESET']);
    expect(proxy.openConnections).toBe(0);
    // New connections work again after the cut.
    const again = await connectTo(proxy.port);
    expect((await roundTrip(again, 'back')).echo).toBe('back');
    again.destroy();
  });

  it('refuses to forward anywhere but loopback', async () => {
    await expect(FaultProxy.start({ host: '10.0.0.1', port: 80 })).rejects.toThrow(
      /only forwards to loopback/,
    );
  });
});

describe('fault proxy in front of a real Redis', () => {
  let redis: ServerGroup;
  let proxy: FaultProxy;
  beforeAll(async () => {
    redis = await startServers('redis', { faults: true });
    const [host = '', port = ''] = endpoint(redis, 'REDIS_HOSTS').split(':');
    proxy = await FaultProxy.start({ host, port: Number(port) });
  });
  afterAll(async () => {
    await proxy?.close();
    await redis?.stop();
  });

  it('a blackholed command times out, and the client recovers when traffic passes again', async () => {
    const client = new Redis({
      host: '127.0.0.1',
      port: proxy.port,
      commandTimeout: 300,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
    });
    client.on('error', () => undefined); // the cut below is expected; ioredis reconnects by itself
    await client.connect();
    expect(await client.ping()).toBe('PONG');
    proxy.setMode({ kind: 'blackhole' });
    await expect(client.ping()).rejects.toThrow(/timed out/i);
    proxy.setMode({ kind: 'pass' });
    proxy.cutAll(); // the blackholed reply would otherwise still be owed on that connection
    const deadline = performance.now() + 5_000;
    let answer: string | undefined;
    while (!answer && performance.now() < deadline) {
      answer = await client.ping().catch(() => undefined);
    }
    expect(answer).toBe('PONG');
    client.disconnect();
  });
});
