import { type IncomingHttpHeaders, type IncomingMessage, request } from 'node:http';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { crossOrigin, isLoopback, tokenMatches } from '../../src/cli/dashboard/auth.js';
import { nameQueue } from '../../src/cli/dashboard/name-queue.js';
import { Poller } from '../../src/cli/dashboard/poller.js';
import { DashboardServer, type DashboardServerOptions } from '../../src/cli/dashboard/server.js';
import { type NameRow, takeSnapshot } from '../../src/cli/dashboard/snapshot.js';
import { changes, forcedKey, HISTORY_LENGTH, Timeline } from '../../src/cli/dashboard/timeline.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { createElection, type Lock, MemoryLockProvider } from '../../src/index.js';
import { MemoryLockServer } from '../../src/memory/server.js';
import type { LockProvider } from '../../src/types.js';

const assetsDir = resolve(import.meta.dirname, '../../src/cli/dashboard/assets');

function lockRow(name: string, token: string, extra: Partial<NameRow['holders'][number]> = {}): NameRow {
  return {
    name,
    kind: 'lock',
    waiters: 0,
    holders: [
      {
        owner: 'a',
        token,
        since: '2026-01-01T00:00:00.000Z',
        ageMs: 0,
        expiresAt: null,
        expiresInMs: null,
        ...extra,
      },
    ],
  };
}

/** The status of GET url sent with this Host header (fetch does not let a caller set it). */
function statusWithHost(url: string, host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { headers: { host } }, (response) => {
      response.resume();
      resolve(response.statusCode);
    });
    sent.on('error', reject);
    sent.end();
  });
}

/** A request over HTTP with the headers given (fetch does not let a caller set Host or Origin). */
function send(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number | undefined; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { method: options.method ?? 'GET', headers: options.headers }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      response.on('end', () => resolve({ status: response.statusCode, headers: response.headers, body }));
    });
    sent.on('error', reject);
    sent.end(options.body);
  });
}

describe('dashboard timeline: what changed between two looks', () => {
  const now = Date.parse('2026-01-01T00:00:10.000Z');

  it('a new token is a grant; a token gone before its lease ran out is a release, with the hold time', () => {
    const entries = changes([lockRow('a', '5')], [lockRow('a', '6')], now);
    expect(entries.map((entry) => [entry.type, entry.token, entry.heldMs])).toEqual([
      ['release', '5', 10_000],
      ['grant', '6', undefined],
    ]);
  });

  it('a token gone after its lease ran out is a loss (expired)', () => {
    const before = [lockRow('a', '5', { expiresAt: '2026-01-01T00:00:09.000Z' })];
    const [entry] = changes(before, [], now);
    expect(entry).toMatchObject({ type: 'loss', reason: 'expired', token: '5', seen: 'poll' });
  });

  it('an election reports elected and term-ended; a force-release made here is not reported twice', () => {
    const term = (token: string): NameRow => ({ ...lockRow('e', token), kind: 'election' });
    expect(changes([term('1')], [term('2')], now).map((entry) => entry.type)).toEqual([
      'term-ended',
      'elected',
    ]);
    expect(changes([lockRow('a', '5')], [], now, new Set([forcedKey('a', '5')]))).toEqual([]);
  });

  it('keeps the last grants and hold times per name, and a bounded list of entries', () => {
    const timeline = new Timeline(10);
    for (let i = 1; i <= HISTORY_LENGTH + 5; i++) {
      timeline.add({
        at: '',
        name: 'a',
        kind: 'lock',
        type: 'grant',
        owner: null,
        token: String(i),
        seen: 'poll',
      });
      timeline.add({
        at: '',
        name: 'a',
        kind: 'lock',
        type: 'release',
        owner: null,
        token: String(i),
        heldMs: i,
        seen: 'poll',
      });
    }
    const history = timeline.history('a');
    expect(history.grants).toHaveLength(HISTORY_LENGTH);
    expect(history.grants.at(-1)?.token).toBe(String(HISTORY_LENGTH + 5));
    expect(history.holdTimesMs).toHaveLength(HISTORY_LENGTH);
    expect(timeline.entries()).toHaveLength(10);
  });
});

describe('dashboard snapshot on the memory provider', () => {
  it('tells locks, read-write locks, semaphores and elections apart, with their holders', async () => {
    const provider = new MemoryLockProvider();
    try {
      const lock = await provider.acquire('app/lock', { owner: 'alice', ttlMs: 10_000 });
      const readWrite = provider.readWriteLock('app/rw');
      const [first, second] = [
        await readWrite.acquireRead({ owner: 'r1' }),
        await readWrite.acquireRead({ owner: 'r2' }),
      ];
      const permit = await provider.semaphore('app/jobs', { limit: 3 }).acquire({ owner: 'bob', permits: 2 });
      const term = await createElection(provider, 'app/leader').campaign('carol');
      const rows = await takeSnapshot(provider, {
        prefix: 'app/',
        semaphores: new Map([
          ['app/jobs', 3],
          ['other/jobs', 1],
        ]),
        elections: ['app/leader'],
      });
      expect(rows.map((row) => [row.name, row.kind])).toEqual([
        ['app/jobs', 'semaphore'],
        ['app/leader', 'election'],
        ['app/lock', 'lock'],
        ['app/rw', 'read-write'],
      ]);
      const [jobs, leader, held, shared] = rows;
      expect(jobs).toMatchObject({ permits: { used: 2, limit: 3 }, holders: [{ owner: 'bob', permits: 2 }] });
      expect(jobs?.holders[0]?.token).toBe(permit.fencingToken.toString());
      expect(leader).toMatchObject({ leader: { value: 'carol', term: term.term.toString() } });
      expect(held?.holders[0]).toMatchObject({ owner: 'alice', token: lock.fencingToken.toString() });
      expect(held?.holders[0]?.expiresInMs).toBeGreaterThan(0);
      expect(shared?.holders.map((holder) => [holder.owner, holder.mode, holder.token])).toEqual([
        ['r1', 'read', first.fencingToken.toString()],
        ['r2', 'read', second.fencingToken.toString()],
      ]);
    } finally {
      await provider.close();
    }
  });
});

describe('dashboard auth', () => {
  it('tells loopback addresses from others', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1'])
      expect(isLoopback(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.1', 'example.com', '128.0.0.1'])
      expect(isLoopback(host), host).toBe(false);
  });

  it('tells a write from a page of another origin: Origin against Host, any scheme of HTTP', () => {
    const from = (method: string, headers: Record<string, string>) =>
      crossOrigin({ method, headers } as unknown as IncomingMessage);
    const host = '127.0.0.1:7420';
    expect(from('POST', { host })).toBe(false); // a script: no Origin
    expect(from('POST', { host, origin: 'http://127.0.0.1:7420' })).toBe(false);
    expect(from('POST', { host: 'LocalHost', origin: 'http://localhost:80' })).toBe(false);
    expect(from('POST', { host: 'dash.example', origin: 'https://dash.example' })).toBe(false); // TLS proxy
    expect(from('POST', { host: '[::1]:7420', origin: 'http://[::1]:7420' })).toBe(false);
    expect(from('GET', { host, origin: 'http://attacker.example' })).toBe(false); // a read
    for (const origin of [
      'http://attacker.example',
      'http://127.0.0.1:7421',
      'http://localhost:7420',
      'http://127.0.0.1.attacker.example:7420',
      'null',
      'file://',
    ]) {
      expect(from('POST', { host, origin }), origin).toBe(true);
    }
    expect(from('OPTIONS', { host, origin: 'http://attacker.example' })).toBe(true);
    expect(from('DELETE', { origin: 'http://127.0.0.1:7420' })).toBe(true); // no Host to match
  });

  it('compares tokens whole', () => {
    expect(tokenMatches('s3cret-token-1234', 's3cret-token-1234')).toBe(true);
    expect(tokenMatches('s3cret-token-123', 's3cret-token-1234')).toBe(false);
    expect(tokenMatches(undefined, 's3cret-token-1234')).toBe(false);
  });
});

describe('dashboard server on the memory provider', () => {
  const opened: Array<{ server: DashboardServer; poller: Poller; provider: LockProvider }> = [];
  afterEach(async () => {
    for (const { server, poller, provider } of opened.splice(0)) {
      await Promise.all([server.close(), poller.stop()]);
      await provider.close();
    }
  });

  async function start(options: Partial<DashboardServerOptions> & { provider?: LockProvider } = {}) {
    const provider = options.provider ?? new MemoryLockProvider();
    const poller = new Poller({
      provider,
      watched: { prefix: '', semaphores: new Map([['jobs', 2]]), elections: [] },
      intervalMs: 50,
      deadlineMs: 2_000,
    });
    const server = await DashboardServer.listen({
      provider,
      poller,
      host: '127.0.0.1',
      port: 0,
      authToken: undefined,
      allowForceRelease: false,
      operator: 'ops@test',
      assetsDir,
      backendNote: 'polled',
      intervalMs: 50,
      prefix: '',
      ...options,
    });
    poller.start();
    opened.push({ server, poller, provider });
    return { server, poller, provider, url: server.url };
  }

  /** GETs path until check passes on the answer (the poller looks every 50 ms). */
  async function until(
    url: string,
    // biome-ignore lint/suspicious/noExplicitAny: the answers' JSON, checked field by field
    check: (status: number, body: any) => boolean,
    init?: RequestInit,
  ) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const response = await fetch(url, init);
      // biome-ignore lint/suspicious/noExplicitAny: the answers' JSON, checked field by field
      const body: any = await response.json();
      if (check(response.status, body)) return { status: response.status, body };
      if (Date.now() > deadline) throw new Error(`${url}: still ${response.status} ${JSON.stringify(body)}`);
      await new Promise((done) => setTimeout(done, 25));
    }
  }

  it('shows holders with tokens, 404s an unknown name, refuses force-release without the flag', async () => {
    const { provider, url } = await start();
    const lock = await provider.acquire('orders/1', { owner: 'alice', ttlMs: 10_000 });
    const permit = await provider.semaphore?.('jobs', { limit: 2 }).acquire({ owner: 'bob' });
    const { body } = await until(
      `${url}api/names`,
      (status, body) => status === 200 && body.names.length === 2,
    );
    expect(body.names).toMatchObject([
      {
        name: 'jobs',
        kind: 'semaphore',
        permits: { used: 1, limit: 2 },
        holders: [{ owner: 'bob', token: permit?.fencingToken.toString() }],
      },
      { name: 'orders/1', kind: 'lock', holders: [{ owner: 'alice', token: lock.fencingToken.toString() }] },
    ]);
    const unknown = await fetch(`${url}api/names/nobody%2Fhere`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'no such name', name: 'nobody/here' });
    const refused = await fetch(`${url}api/force-release`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'orders/1', token: lock.fencingToken.toString(), reason: 'stuck' }),
    });
    expect(refused.status).toBe(403);
    expect(lock.held).toBe(true);
    const page = await fetch(url);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('<script src="/dashboard.js"');
    // A page elsewhere that reaches the loopback port through DNS rebinding names its own host.
    expect(await statusWithHost(url, 'attacker.example')).toBe(403);
    expect(await statusWithHost(url, `localhost:${new URL(url).port}`)).toBe(200);
  });

  it("a lock's detail has its waiter queue in order; other kinds, and a queue that cannot be read, say why", async () => {
    const { provider, url } = await start({
      provider: new MemoryLockProvider({ server: new MemoryLockServer() }),
    });
    const lock = await provider.acquire('orders/1', { owner: 'alice', ttlMs: 10_000 });
    const waits = ['bob', 'carol'].map((owner) => provider.acquire('orders/1', { owner, ttlMs: 10_000 }));
    await provider.semaphore?.('jobs', { limit: 2 }).acquire({ owner: 'dan' });
    const { body } = await until(
      `${url}api/names/orders%2F1`,
      (status, body) => status === 200 && body.waiters === 2,
    );
    expect(body.queue).toMatchObject([
      { position: 1, owner: 'bob', requests: 1 },
      { position: 2, owner: 'carol', requests: 1 },
    ]);
    for (const entry of body.queue) {
      expect(Date.parse(entry.since)).not.toBeNaN();
      expect(entry.waitingMs).toBeGreaterThanOrEqual(0);
    }
    const semaphore = await until(`${url}api/names/jobs`, (status) => status === 200);
    expect(semaphore.body).toMatchObject({ queue: null, queueNote: 'the queue of a semaphore is not shown' });
    await lock.release();
    await (await (waits[0] as Promise<Lock>)).release();
    await (await (waits[1] as Promise<Lock>)).release();
  });

  it('nameQueue: no queue() or a failed read is a note, never a failed detail', async () => {
    const base = { backend: 'redlock' } as LockProvider;
    expect(await nameQueue(base, 'a', 'lock')).toEqual({
      queue: null,
      queueNote: 'the redlock provider has no queue()',
    });
    const failing = {
      ...base,
      queue: async () => {
        throw new BackendUnavailableError('redis: queue: no answer within 5000 ms');
      },
    } as LockProvider;
    expect(await nameQueue(failing, 'a', 'lock')).toEqual({
      queue: null,
      queueNote: 'redis: queue: no answer within 5000 ms [BACKEND_UNAVAILABLE]',
    });
    const untyped = {
      ...base,
      queue: async () => Promise.reject(new Error('secret detail')),
    } as LockProvider;
    expect(await nameQueue(untyped, 'a', 'lock')).toEqual({
      queue: null,
      queueNote: 'the queue could not be read',
    });
    const line = {
      ...base,
      queue: async () => [{ owner: undefined, since: new Date(1_000), requests: undefined }],
    } as LockProvider;
    expect(await nameQueue(line, 'a', 'lock', () => 3_500)).toEqual({
      queue: [
        { position: 1, owner: null, since: '1970-01-01T00:00:01.000Z', waitingMs: 2_500, requests: null },
      ],
    });
  });

  it('force-releases with the flag: the holder loses, the timeline records who, why and the token', async () => {
    const { provider, url } = await start({ allowForceRelease: true });
    const lock = await provider.acquire('orders/2', { owner: 'alice' });
    const token = lock.fencingToken.toString();
    await until(`${url}api/names/orders%2F2`, (status) => status === 200);
    const post = (body: unknown) =>
      fetch(`${url}api/force-release`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post({ name: 'orders/2', token })).status).toBe(400); // no reason
    expect((await post({ name: 'orders/2', reason: 'stuck' })).status).toBe(400); // no token
    const answer = await post({ name: 'orders/2', token, reason: 'stuck at 3 a.m.' });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ released: { holder: 'alice', token } });
    expect(lock.signal.aborted).toBe(true);
    const { body } = await until(`${url}api/names/orders%2F2`, (_, body) => body.holders?.length === 0);
    // The grant shows too when the first look came before the acquire; the release only as forced.
    expect(
      body.timeline.map((entry: { type: string }) => entry.type).filter((type: string) => type !== 'grant'),
    ).toEqual(['force-release']);
    expect(body.timeline.at(-1)).toMatchObject({
      token,
      reason: 'stuck at 3 a.m.',
      by: 'ops@test (dashboard, from 127.0.0.1)',
    });
  });

  it('refuses a write from a page of another origin before anything else; offers no CORS', async () => {
    const { provider, url } = await start({ allowForceRelease: true });
    const lock = await provider.acquire('orders/3', { owner: 'alice' });
    await until(`${url}api/names/orders%2F3`, (status) => status === 200);
    const port = new URL(url).port;
    const release = (held: { fencingToken: bigint }, headers: Record<string, string> = {}) =>
      send(`${url}api/force-release`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ name: 'orders/3', token: held.fencingToken.toString(), reason: 'stuck' }),
      });
    for (const origin of ['http://attacker.example', `http://127.0.0.1.attacker.example:${port}`, 'null']) {
      const refused = await release(lock, { origin });
      expect(refused.status, origin).toBe(403);
      expect(JSON.parse(refused.body)).toEqual({
        error: 'a page of another origin may not send this request',
      });
    }
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    // A preflight from elsewhere is refused, and one from nowhere allows nothing either.
    const preflight = {
      origin: 'http://attacker.example',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    };
    const cors = (headers: IncomingHttpHeaders) =>
      Object.keys(headers).filter((key) => key.startsWith('access-control-'));
    const foreign = await send(`${url}api/force-release`, { method: 'OPTIONS', headers: preflight });
    expect(foreign.status).toBe(403);
    expect(cors(foreign.headers)).toEqual([]);
    const bare = await send(`${url}api/force-release`, { method: 'OPTIONS' });
    expect([bare.status, bare.headers.allow, cors(bare.headers)]).toEqual([405, 'POST', []]);
    // A read from elsewhere is answered as before: without CORS headers its page cannot read it.
    const read = await send(`${url}api/names`, { headers: { origin: 'http://attacker.example' } });
    expect([read.status, cors(read.headers)]).toEqual([200, []]);
    // The dashboard's own page (its origin) and a script (no Origin) force-release as before.
    const own = await release(lock, { origin: new URL(url).origin });
    expect(own.status).toBe(200);
    expect(lock.signal.aborted).toBe(true);
    const next = await provider.acquire('orders/3', { owner: 'bob' });
    expect((await release(next)).status).toBe(200);
    expect(next.signal.aborted).toBe(true);
  });

  it('refuses a write from another origin before it asks for the token', async () => {
    const { url } = await start({ allowForceRelease: true, authToken: 'a-long-dashboard-token' });
    const post = (origin: string) =>
      send(`${url}api/force-release`, { method: 'POST', headers: { origin, 'content-type': 'text/plain' } });
    expect((await post('http://attacker.example')).status).toBe(403);
    expect((await post(new URL(url).origin)).status).toBe(401);
  });

  it('needs the token when given one: Bearer header, or /?token= which sets a cookie', async () => {
    const token = 'a-long-dashboard-token';
    const { url } = await start({ authToken: token });
    expect((await fetch(`${url}api/names`)).status).toBe(401);
    expect(
      (await fetch(`${url}api/names`, { headers: { authorization: 'Bearer wrong-token-xxxxxxx' } })).status,
    ).toBe(401);
    await until(`${url}api/names`, (status) => status === 200, {
      headers: { authorization: `Bearer ${token}` },
    });
    const landing = await fetch(`${url}?token=${token}`, { redirect: 'manual' });
    expect(landing.status).toBe(303);
    const cookie = (landing.headers.get('set-cookie') ?? '').split(';')[0] as string;
    expect((await fetch(`${url}api/names`, { headers: { cookie } })).status).toBe(200);
    const refusal = await (await fetch(`${url}api/names`)).text();
    expect(refusal).not.toContain(token);
  });

  it('bad requests get error answers, and the server goes on answering', async () => {
    const { url } = await start({ allowForceRelease: true });
    await until(`${url}api/names`, (status) => status === 200);
    const post = (body: string, type = 'application/json') =>
      fetch(`${url}api/force-release`, { method: 'POST', headers: { 'content-type': type }, body });
    expect((await fetch(`${url}api/names/%E0%A4%A`)).status).toBe(400);
    expect((await fetch(`${url}nothing/here`)).status).toBe(404);
    expect((await fetch(`${url}api/force-release`)).status).toBe(405);
    expect((await post('{"name":', 'application/json')).status).toBe(400);
    expect((await post('null')).status).toBe(400);
    expect((await post('{"name":"a","token":"1","reason":"x"}', 'text/plain')).status).toBe(415);
    expect((await post(JSON.stringify({ name: 'a', token: '1', reason: 'x'.repeat(20_000) }))).status).toBe(
      413,
    );
    expect((await post(JSON.stringify({ name: 'a', token: '1', reason: 'x'.repeat(2_000) }))).status).toBe(
      400,
    );
    expect((await post(JSON.stringify({ name: '', token: '1', reason: 'x' }))).status).toBe(400);
    // Not HTTP at all: the connection is answered 400 and closed.
    const { port } = new URL(url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => socket.end('NOT HTTP\r\n\r\n'));
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect((await fetch(`${url}api/names`)).status).toBe(200);
  });

  it('answers 503 while the backend is out and recovers by itself', async () => {
    const memory = new MemoryLockProvider();
    let out = false;
    const flaky: LockProvider = Object.assign(Object.create(memory), {
      list: async (prefix?: string) => {
        if (out) throw new BackendUnavailableError('memory: list failed (test outage)');
        return memory.list(prefix);
      },
      semaphore: memory.semaphore.bind(memory),
      inspect: memory.inspect.bind(memory),
      close: memory.close.bind(memory),
    });
    const { url } = await start({ provider: flaky });
    await until(`${url}api/names`, (status) => status === 200);
    out = true;
    const { body } = await until(`${url}api/names`, (status) => status === 503);
    expect(body).toMatchObject({
      error: 'backend unavailable',
      detail: expect.stringContaining('test outage'),
    });
    expect((await fetch(`${url}api/names/jobs`)).status).toBe(503);
    out = false;
    await until(`${url}api/names`, (status) => status === 200);
  });
});
