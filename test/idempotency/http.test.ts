import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline, Readable } from 'node:stream';
import express from 'express';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createIdempotencyStore,
  IdempotencyStore,
  idempotencyContext,
  idempotencyMiddleware,
  idempotencyPlugin,
} from '../../src/idempotency/index.js';
import { MemoryRecords } from '../../src/idempotency/memory-records.js';
import type { RecordBackend } from '../../src/idempotency/records.js';
import { eventually } from '../../src/testing/index.js';

// The IETF Idempotency-Key draft over real HTTP (fetch), on Express 5 and Fastify 5.
interface App {
  base: string;
  charges: () => number;
  /** Holds the next /payments handler until released. */
  hold(): () => void;
  close(): Promise<void>;
}

interface Behaviour {
  charges: number;
  gate: Promise<void> | undefined;
  failures: number;
  /** Runs of /flushed-then-failed: the first flushes its headers, then its body stream fails. */
  flushes: number;
}

async function charge(state: Behaviour, body: { amount?: number }) {
  state.charges++;
  if (state.gate) await state.gate;
  return { id: `ch_${state.charges}`, amount: body.amount };
}

function controls(state: Behaviour) {
  return {
    charges: () => state.charges,
    hold: () => {
      let release!: () => void;
      state.gate = new Promise<void>((r) => {
        release = r;
      });
      return () => {
        state.gate = undefined;
        release();
      };
    },
  };
}

async function expressApp(store: IdempotencyStore): Promise<App> {
  const state: Behaviour = { charges: 0, gate: undefined, failures: 0, flushes: 0 };
  const app = express();
  app.use(express.json());
  app.use(idempotencyMiddleware(store, { leaseMs: 5_000 }));
  app.post('/payments', async (req, res) => {
    const result = await charge(state, req.body);
    res.status(201).set('location', `/payments/${result.id}`).set('x-trace', 'first').json(result);
  });
  app.post('/flaky', (_req, res) => {
    state.failures++;
    if (state.failures === 1) res.status(503).json({ error: 'try again' });
    else res.status(201).json({ attempt: state.failures });
  });
  app.post('/flushed-then-failed', (_req, res) => {
    state.flushes++;
    if (state.flushes > 1) return void res.status(201).json({ attempt: state.flushes });
    res.status(201).type('text/plain').flushHeaders();
    // With the headers out, an error can only cut the response off: pipeline destroys it.
    pipeline(failingBody(), res, () => undefined);
  });
  app.get('/payments', (_req, res) => {
    res.json({ list: [] });
  });
  app.post('/token', (req, res) => {
    const context = idempotencyContext(req);
    res.status(201).json({ token: String(context?.fencingToken), live: context?.signal.aborted === false });
  });
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ...controls(state),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function fastifyApp(store: IdempotencyStore): Promise<App> {
  const state: Behaviour = { charges: 0, gate: undefined, failures: 0, flushes: 0 };
  const app = Fastify();
  await app.register(idempotencyPlugin, { store, leaseMs: 5_000 });
  app.post('/payments', async (request, reply) => {
    const result = await charge(state, request.body as { amount?: number });
    reply.code(201).header('location', `/payments/${result.id}`).header('x-trace', 'first');
    return result;
  });
  app.post('/flaky', async (_request, reply) => {
    state.failures++;
    if (state.failures === 1) return reply.code(503).send({ error: 'try again' });
    return reply.code(201).send({ attempt: state.failures });
  });
  app.post('/flushed-then-failed', async (_request, reply) => {
    state.flushes++;
    if (state.flushes > 1) return reply.code(201).send({ attempt: state.flushes });
    reply.code(201).raw.flushHeaders();
    // With the headers out, an error can only cut the response off: pipeline destroys it.
    pipeline(failingBody(), reply.raw, () => undefined);
    return reply;
  });
  app.get('/payments', async () => ({ list: [] }));
  app.post('/token', async (request, reply) => {
    const context = idempotencyContext(request);
    reply.code(201);
    return { token: String(context?.fencingToken), live: context?.signal.aborted === false };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    ...controls(state),
    close: () => app.close(),
  };
}

/** A response body that fails after its first chunk. */
function failingBody(): Readable {
  let pushed = false;
  return new Readable({
    read() {
      if (pushed) return;
      pushed = true;
      this.push('partial');
      setTimeout(() => this.destroy(new Error('the body failed')), 10);
    },
  });
}

const post = (base: string, path: string, body: unknown, key?: string, signal?: AbortSignal) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    body: JSON.stringify(body),
  });

describe.each([
  ['Express', expressApp],
  ['Fastify', fastifyApp],
] as const)('%s over real HTTP', (_name, start) => {
  let store: IdempotencyStore;
  let app: App;
  beforeAll(async () => {
    store = await createIdempotencyStore(`memory://http-${crypto.randomUUID()}`);
    app = await start(store);
  });
  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  it('a repeat replays status, kept headers and body with Idempotency-Replayed; the charge runs once', async () => {
    const key = crypto.randomUUID();
    const first = await post(app.base, '/payments', { amount: 4200 }, key);
    const firstBody = await first.json();
    const again = await post(app.base, '/payments', { amount: 4200 }, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('content-type')).toMatch(/application\/json/);
    expect(again.headers.get('x-trace')).toBeNull(); // not in keepHeaders
    expect(await again.json()).toEqual(firstBody);
    expect(app.charges()).toBe(1);
  });

  it('400 without a key, or with a bad one; requests the draft does not cover pass through', async () => {
    const before = app.charges();
    const missing = await post(app.base, '/payments', { amount: 1 });
    expect(missing.status).toBe(400);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');
    expect(await missing.json()).toMatchObject({ status: 400, title: 'Idempotency-Key is missing' });
    const tooLong = await post(app.base, '/payments', { amount: 1 }, 'k'.repeat(256));
    expect(tooLong.status).toBe(400);
    expect(((await tooLong.json()) as { detail: string }).detail).toMatch(/255/);
    expect(app.charges()).toBe(before);
    const list = await fetch(`${app.base}/payments`);
    expect(list.status).toBe(200);
  });

  it('the key may come as a Structured Field string, as the draft writes it: "k" and k are one key', async () => {
    const key = crypto.randomUUID();
    const before = app.charges();
    const quoted = await post(app.base, '/payments', { amount: 3 }, `"${key}"`);
    const bare = await post(app.base, '/payments', { amount: 3 }, key);
    expect(quoted.status).toBe(201);
    expect(bare.headers.get('idempotency-replayed')).toBe('true');
    expect(app.charges() - before).toBe(1);
  });

  it('the handler gets the run’s fencing token and lease signal through idempotencyContext(req)', async () => {
    const key = crypto.randomUUID();
    const first = await post(app.base, '/token', {}, key);
    const body = (await first.json()) as { token: string; live: boolean };
    expect(body.live).toBe(true);
    expect(BigInt(body.token)).toBeGreaterThan(0n);
    expect(await (await post(app.base, '/token', {}, key)).json()).toEqual(body);
  });

  it('415 for a body no parser read: it could not be compared, so the handler is not run', async () => {
    const before = app.charges();
    const res = await fetch(`${app.base}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-unknown', 'idempotency-key': crypto.randomUUID() },
      body: 'amount=1',
    });
    expect(res.status).toBe(415);
    expect(app.charges()).toBe(before);
  });

  it('422 when the key is reused with another body', async () => {
    const key = crypto.randomUUID();
    expect((await post(app.base, '/payments', { amount: 1 }, key)).status).toBe(201);
    const other = await post(app.base, '/payments', { amount: 2 }, key);
    expect(other.status).toBe(422);
    expect(other.headers.get('content-type')).toBe('application/problem+json');
    expect(await other.json()).toMatchObject({ status: 422 });
  });

  it('409 with Retry-After while the first request is in flight; afterwards the repeat is replayed', async () => {
    const key = crypto.randomUUID();
    const release = app.hold();
    const before = app.charges();
    const first = post(app.base, '/payments', { amount: 7 }, key);
    await eventually('the first request reached the handler', async () => app.charges() > before);
    const busy = await post(app.base, '/payments', { amount: 7 }, key);
    expect(busy.status).toBe(409);
    expect(busy.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await busy.json()).toMatchObject({ status: 409 });
    release();
    const done = await first;
    expect(done.status).toBe(201);
    const replay = await post(app.base, '/payments', { amount: 7 }, key);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(await replay.json()).toEqual(await done.json());
  });

  it('a client that gives up mid-request does not free the key: its retry is answered, one charge', async () => {
    const key = crypto.randomUUID();
    const before = app.charges();
    const release = app.hold();
    const gaveUp = await post(app.base, '/payments', { amount: 9 }, key, AbortSignal.timeout(100)).catch(
      (e: unknown) => e,
    );
    expect((gaveUp as Error).name).toBe('TimeoutError');
    await new Promise((r) => setTimeout(r, 100)); // the server has seen the disconnect
    setTimeout(release, 100);
    // A client's retry loop: 409 means "still in flight", so ask again a little later (at most 30 times).
    let retry = await post(app.base, '/payments', { amount: 9 }, key);
    for (let i = 0; i < 30 && retry.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 50));
      retry = await post(app.base, '/payments', { amount: 9 }, key);
    }
    expect(retry.status).toBe(201);
    expect(app.charges() - before).toBe(1);
    expect(retry.headers.get('idempotency-replayed')).toBe('true');
  });

  it('a handler that fails after flushing its headers frees the key: the retry runs it again', async () => {
    const key = crypto.randomUUID();
    // The first answer is cut off or an error, whatever the framework makes of it.
    await post(app.base, '/flushed-then-failed', {}, key)
      .then((res) => res.arrayBuffer())
      .catch(() => undefined);
    // A client's retry loop: 409 means "still in flight" (at most 40 times, 50 ms apart).
    let retry = await post(app.base, '/flushed-then-failed', {}, key);
    for (let i = 0; i < 40 && retry.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 50));
      retry = await post(app.base, '/flushed-then-failed', {}, key);
    }
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual({ attempt: 2 });
    const replay = await post(app.base, '/flushed-then-failed', {}, key);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(await replay.json()).toEqual({ attempt: 2 });
  });

  it('a 5xx answer is sent but not stored: the retry runs the handler again', async () => {
    const key = crypto.randomUUID();
    const failed = await post(app.base, '/flaky', {}, key);
    expect(failed.status).toBe(503);
    const retried = await post(app.base, '/flaky', {}, key);
    expect(retried.status).toBe(201);
    expect(await retried.json()).toEqual({ attempt: 2 });
    const replay = await post(app.base, '/flaky', {}, key);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(await replay.json()).toEqual({ attempt: 2 });
  });
});

describe.each([
  ['Express', expressApp],
  ['Fastify', fastifyApp],
] as const)('%s with its store down', (_name, start) => {
  it('answers 503 problem+json within the call deadline and never runs the handler', async () => {
    const store = await createIdempotencyStore('redis://127.0.0.1:1', { callTimeoutMs: 500 });
    const app = await start(store);
    try {
      const res = await post(app.base, '/payments', { amount: 1 }, crypto.randomUUID());
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(await res.json()).toMatchObject({ status: 503 });
      expect(app.charges()).toBe(0);
    } finally {
      await app.close();
      await store.close();
    }
  });
});

/** A body that sends a chunk every 25 ms and ends after 10 s: long enough to be cut off by its client. */
function slowBody(): Readable {
  let sent = 0;
  return new Readable({
    read() {
      setTimeout(() => this.push(sent++ < 400 ? `chunk ${sent}\n` : null), 25);
    },
  });
}

interface StreamingApp {
  base: string;
  /** Runs of each streamed route: the first streams (and is cut off), later ones answer at once. */
  runs: Record<string, number>;
  /** Connections the server has seen close. */
  closedConnections(): number;
  close(): Promise<void>;
}

function countClosed(server: Server): () => number {
  let closed = 0;
  server.on('connection', (socket) => socket.once('close', () => closed++));
  return () => closed;
}

const streamedRoutes: Record<'Express' | 'Fastify', string[]> = {
  Express: ['/piped'],
  Fastify: ['/piped', '/stream-payload'],
};

async function streamingExpressApp(store: IdempotencyStore, leaseMs: number): Promise<StreamingApp> {
  const runs: Record<string, number> = { '/piped': 0 };
  const app = express();
  app.use(express.json());
  app.use(idempotencyMiddleware(store, { leaseMs }));
  app.post('/piped', (_req, res) => {
    runs['/piped'] = (runs['/piped'] ?? 0) + 1;
    if (runs['/piped'] > 1) return void res.status(201).json({ attempt: runs['/piped'] });
    res.status(200).type('text/plain');
    slowBody().pipe(res);
  });
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    runs,
    closedConnections: countClosed(server),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function streamingFastifyApp(store: IdempotencyStore, leaseMs: number): Promise<StreamingApp> {
  const runs: Record<string, number> = { '/piped': 0, '/stream-payload': 0 };
  const app = Fastify({ forceCloseConnections: true });
  await app.register(idempotencyPlugin, { store, leaseMs });
  app.post('/piped', async (_request, reply) => {
    runs['/piped'] = (runs['/piped'] ?? 0) + 1;
    if (runs['/piped'] > 1) return reply.code(201).send({ attempt: runs['/piped'] });
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': 'text/plain' });
    slowBody().pipe(reply.raw);
  });
  app.post('/stream-payload', async (_request, reply) => {
    runs['/stream-payload'] = (runs['/stream-payload'] ?? 0) + 1;
    if (runs['/stream-payload'] > 1) return reply.code(201).send({ attempt: runs['/stream-payload'] });
    return reply.code(200).type('text/plain').send(slowBody());
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    runs,
    closedConnections: countClosed(app.server),
    close: () => app.close(),
  };
}

describe.each([
  ['Express', streamingExpressApp],
  ['Fastify', streamingFastifyApp],
] as const)('%s with a streamed response', (name, start) => {
  const leaseMs = 1_000;
  let store: IdempotencyStore;
  let app: StreamingApp;
  beforeAll(async () => {
    store = await createIdempotencyStore(`memory://stream-${crypto.randomUUID()}`);
    app = await start(store, leaseMs);
  });
  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  it.each(streamedRoutes[name])(
    'a client that disconnects mid-body (%s) does not leave the key in flight for good: the retry runs the handler again',
    async (path) => {
      const key = crypto.randomUUID();
      const controller = new AbortController();
      const first = post(app.base, path, {}, key, controller.signal)
        .then((res) => res.arrayBuffer())
        .catch((e: unknown) => e);
      // The body is being streamed (or, on Express, gathered to be stored) when the client goes.
      await eventually('the handler streams', async () => app.runs[path] === 1);
      await new Promise((r) => setTimeout(r, 150));
      controller.abort();
      await first;
      // A client's retry loop: 409 means "still in flight" (at most 100 times, 100 ms apart, so
      // well past the lease; the first response's body would go on for 10 s).
      let retry = await post(app.base, path, {}, key);
      for (let i = 0; i < 100 && retry.status === 409; i++) {
        await new Promise((r) => setTimeout(r, 100));
        retry = await post(app.base, path, {}, key);
      }
      expect(retry.status).toBe(201);
      expect(await retry.json()).toEqual({ attempt: 2 });
      const replay = await post(app.base, path, {}, key);
      expect(replay.headers.get('idempotency-replayed')).toBe('true');
    },
  );
});

/** Memory records whose begin waits, while held, until released: a start slower than the client. */
function slowStartRecords(): { records: RecordBackend; hold(): () => void; begins(): number } {
  const memory = new MemoryRecords(`slow-start-${crypto.randomUUID()}`);
  let gate: Promise<void> | undefined;
  let begins = 0;
  const records: RecordBackend = {
    name: memory.name,
    begin: async (...args) => {
      begins++;
      await gate;
      return memory.begin(...args);
    },
    renew: (...args) => memory.renew(...args),
    complete: (...args) => memory.complete(...args),
    abandon: (...args) => memory.abandon(...args),
    close: () => memory.close(),
  };
  return {
    records,
    begins: () => begins,
    hold: () => {
      let release!: () => void;
      gate = new Promise<void>((r) => {
        release = r;
      });
      return () => {
        gate = undefined;
        release();
      };
    },
  };
}

describe.each([
  ['Express', streamingExpressApp],
  ['Fastify', streamingFastifyApp],
] as const)('%s with a client gone before the run started', (_name, start) => {
  const leaseMs = 1_000;
  const slow = slowStartRecords();
  let store: IdempotencyStore;
  let app: StreamingApp;
  beforeAll(async () => {
    store = new IdempotencyStore(slow.records);
    app = await start(store, leaseMs);
  });
  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  it('a client that disconnects while the start is under way leaves the run to its lease: a retry after it gets an answer', async () => {
    const key = crypto.randomUUID();
    const release = slow.hold();
    const closedBefore = app.closedConnections();
    const controller = new AbortController();
    const first = post(app.base, '/piped', {}, key, controller.signal).catch((e: unknown) => e);
    await eventually('the start reached the store', async () => slow.begins() === 1);
    controller.abort();
    await first;
    await eventually('the server saw the client go', async () => app.closedConnections() > closedBefore);
    release(); // the run starts now, for a response already closed; its handler pipes a 10 s body
    await eventually('the handler runs', async () => app.runs['/piped'] === 1);
    // A client's retry loop: 409 means "still in flight" (at most 50 times, 100 ms apart: well past
    // the 1 s lease, well short of the first body's 10 s).
    let retry = await post(app.base, '/piped', {}, key);
    for (let i = 0; i < 50 && retry.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 100));
      retry = await post(app.base, '/piped', {}, key);
    }
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual({ attempt: 2 });
  });
});
