/**
 * The dashboard's HTTP server (node:http): the page and its script, and the JSON API the page and
 * scripts use — GET /api/names, GET /api/names/:name, GET /api/events (server-sent events), POST
 * /api/force-release (only with allowForceRelease). Every request passes auth.ts first. No request
 * can end the process: a handler's failure answers 500, a broken connection is dropped.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { FencekitError } from '../../errors.js';
import { processSecrets } from '../../secret-mask.js';
import type { LockProvider } from '../../types.js';
import { holderJson } from '../commands/admin.js';
import { COOKIE, crossOrigin, hostIsLoopback, isLoopback, requestToken, tokenMatches } from './auth.js';
import { nameQueue } from './name-queue.js';
import type { DashboardState, Poller } from './poller.js';
import type { TimelineEntry } from './timeline.js';

export interface DashboardServerOptions {
  provider: LockProvider;
  poller: Poller;
  host: string;
  port: number;
  /** Required unless host is a loopback address. */
  authToken: string | undefined;
  allowForceRelease: boolean;
  /** Who force-releases through the page, for the audit record (the CLI's operator, user@host). */
  operator: string;
  /** The folder with index.html, dashboard.js and dashboard.css. */
  assetsDir: string;
  /** What the page says about how it sees changes on this backend. */
  backendNote: string;
  intervalMs: number;
  prefix: string;
}

const ASSETS: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/** Largest force-release request body (a reason is at most 1 KiB). */
const MAX_BODY_BYTES = 16 * 1024;
const HEARTBEAT_MS = 15_000;
/** Event streams open at once, and what one may have unsent before it is dropped. */
const MAX_STREAMS = 64;
const MAX_STREAM_BUFFER_BYTES = 4 * 1024 * 1024;
/** How long an unchanged state goes unsent on an event stream. */
const RESEND_MS = 5_000;
/** How many recent timeline entries a new event stream starts with. */
const BACKLOG = 200;

export class DashboardServer {
  readonly #options: DashboardServerOptions;
  readonly #server: Server;
  readonly #streams = new Set<ServerResponse>();

  private constructor(options: DashboardServerOptions) {
    this.#options = options;
    this.#server = createServer((request, response) => {
      this.#handle(request, response).catch((error: unknown) => this.#failed(response, error));
    });
    // A malformed request gets 400 and its connection closed; it never reaches a handler.
    this.#server.on('clientError', (_error, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
      else socket.destroy();
    });
  }

  /** Listens on host:port; rejects (EADDRINUSE, EACCES) without leaving a server behind. */
  static async listen(options: DashboardServerOptions): Promise<DashboardServer> {
    const server = new DashboardServer(options);
    await new Promise<void>((resolve, reject) => {
      server.#server.once('error', reject);
      server.#server.listen(options.port, options.host, () => {
        server.#server.off('error', reject);
        resolve();
      });
    });
    return server;
  }

  /** The URL the page is served at (without any token). */
  get url(): string {
    const { address, port } = this.#server.address() as AddressInfo;
    return `http://${address.includes(':') ? `[${address}]` : address}:${port}/`;
  }

  /** Ends every event stream and connection; resolves once the server is closed. */
  async close(): Promise<void> {
    for (const stream of this.#streams) stream.end();
    this.#streams.clear();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closed;
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    request.on('error', () => response.destroy());
    response.on('error', () => undefined); // the client went away: nothing to tell it
    // A write sent by a page of another site is refused before anything else is looked at.
    if (crossOrigin(request)) {
      return this.#json(response, 403, { error: 'a page of another origin may not send this request' });
    }
    const url = new URL(request.url ?? '/', 'http://dashboard.invalid');
    if (!this.#allowed(request, url, response)) return;
    const method = request.method ?? 'GET';
    // No CORS: a preflight (from this origin or none; another one got 403 above) allows nothing.
    if (method === 'OPTIONS') {
      const allow = url.pathname === '/api/force-release' ? 'POST' : 'GET, HEAD';
      return this.#json(response, 405, { error: 'no cross-origin requests' }, { allow });
    }
    const asset = ASSETS[url.pathname];
    if (asset && (method === 'GET' || method === 'HEAD')) return this.#asset(response, asset);
    if (url.pathname === '/api/config' && method === 'GET') return this.#json(response, 200, this.#config());
    if (url.pathname === '/api/names' && method === 'GET') return this.#names(response);
    if (url.pathname.startsWith('/api/names/') && method === 'GET') {
      let name: string;
      try {
        name = decodeURIComponent(url.pathname.slice('/api/names/'.length));
      } catch {
        return this.#json(response, 400, { error: 'bad name: not URL-encoded' });
      }
      return this.#name(response, name);
    }
    if (url.pathname === '/api/events' && method === 'GET') return this.#events(request, response);
    if (url.pathname === '/api/force-release') {
      if (method !== 'POST') return this.#json(response, 405, { error: 'use POST' }, { allow: 'POST' });
      return this.#forceRelease(request, response);
    }
    this.#json(response, 404, { error: 'not found', path: url.pathname });
  }

  /** Auth (auth.ts); answers the refusal itself and returns false when the request may not go on. */
  #allowed(request: IncomingMessage, url: URL, response: ServerResponse): boolean {
    const { authToken, host } = this.#options;
    if (isLoopback(host) && authToken === undefined && !hostIsLoopback(request)) {
      this.#json(response, 403, { error: 'this dashboard answers to a loopback host name only' });
      return false;
    }
    if (authToken === undefined) return true;
    if (tokenMatches(requestToken(request), authToken)) return true;
    const given = url.searchParams.get('token') ?? undefined;
    if (url.pathname === '/' && tokenMatches(given, authToken)) {
      // The page's requests carry the token as a cookie from now on; the address bar loses it.
      response.writeHead(303, {
        ...SECURITY_HEADERS,
        location: '/',
        'set-cookie': `${COOKIE}=${encodeURIComponent(authToken)}; HttpOnly; SameSite=Strict; Path=/`,
      });
      response.end();
      return false;
    }
    this.#json(response, 401, {
      error: 'this dashboard needs its token: Authorization: Bearer <token>, or open /?token=<token>',
    });
    return false;
  }

  async #asset(response: ServerResponse, asset: { file: string; type: string }): Promise<void> {
    const body = await readFile(join(this.#options.assetsDir, asset.file));
    response.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type });
    response.end(body);
  }

  #config() {
    const { provider, allowForceRelease, backendNote, intervalMs, prefix } = this.#options;
    return { backend: provider.backend, prefix, allowForceRelease, backendNote, intervalMs };
  }

  #names(response: ServerResponse): void {
    const state = this.#options.poller.state;
    if (state.status !== 'ok') {
      this.#unavailable(response, state);
      return;
    }
    this.#json(response, 200, { status: 'ok', at: state.at, names: state.names });
  }

  async #name(response: ServerResponse, name: string): Promise<void> {
    const { poller, provider } = this.#options;
    const state = poller.state;
    if (state.status !== 'ok') {
      this.#unavailable(response, state);
      return;
    }
    const timeline = poller.timeline.entries().filter((entry) => entry.name === name);
    // A name nobody holds now but the timeline has seen is known: its row is empty, its history kept.
    const seen = timeline.at(-1);
    const row =
      state.names.find((candidate) => candidate.name === name) ??
      (seen ? { name, kind: seen.kind, holders: [], waiters: 0 } : undefined);
    if (!row) {
      this.#json(response, 404, { error: 'no such name', name });
      return;
    }
    const queue = await nameQueue(provider, name, row.kind);
    this.#json(response, 200, {
      at: state.at,
      ...row,
      ...queue,
      history: poller.timeline.history(name),
      timeline,
    });
  }

  #unavailable(response: ServerResponse, state: DashboardState): void {
    this.#json(response, 503, {
      error:
        state.status === 'starting'
          ? 'the first look at the backend has not finished'
          : 'backend unavailable',
      ...(state.status === 'unavailable' ? { detail: state.error, at: state.at } : {}),
    });
  }

  #events(request: IncomingMessage, response: ServerResponse): void {
    if (this.#streams.size >= MAX_STREAMS) {
      this.#json(response, 503, { error: `more than ${MAX_STREAMS} event streams open` });
      return;
    }
    response.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      connection: 'keep-alive',
    });
    const send = (event: string, data: unknown) => {
      if (response.writableEnded) return;
      // A client that stops reading is dropped rather than buffered for without bound.
      if (response.writableLength > MAX_STREAM_BUFFER_BYTES) {
        response.destroy();
        return;
      }
      response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    const { poller } = this.#options;
    send('state', poller.state);
    for (const entry of poller.timeline.entries().slice(-BACKLOG)) send('timeline', entry);
    // A look that changed nothing but the clock is sent at most every RESEND_MS: the page counts
    // ages and expiries on by itself between states.
    let sent = { signature: signature(poller.state), at: Date.now() };
    const unsubscribe = poller.subscribe({
      state: (state) => {
        const now = { signature: signature(state), at: Date.now() };
        if (now.signature === sent.signature && now.at - sent.at < RESEND_MS) return;
        sent = now;
        send('state', state);
      },
      timeline: (entry: TimelineEntry) => send('timeline', entry),
    });
    const heartbeat = setInterval(() => {
      if (!response.writableEnded) response.write(': heartbeat\n\n');
    }, HEARTBEAT_MS);
    this.#streams.add(response);
    const end = () => {
      clearInterval(heartbeat);
      unsubscribe();
      this.#streams.delete(response);
    };
    request.on('close', end);
    response.on('close', end);
  }

  async #forceRelease(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const { provider, allowForceRelease, operator, poller } = this.#options;
    if (!allowForceRelease) {
      return this.#json(response, 403, {
        error: 'force-release is off: start the dashboard with --allow-force-release',
      });
    }
    if (!(request.headers['content-type'] ?? '').startsWith('application/json')) {
      return this.#json(response, 415, { error: 'send the request as application/json' });
    }
    const body = await readBody(request);
    if (body === undefined) return this.#json(response, 413, { error: `body over ${MAX_BODY_BYTES} bytes` });
    let fields: { name?: unknown; reason?: unknown; token?: unknown };
    try {
      fields = JSON.parse(body) as typeof fields;
    } catch {
      return this.#json(response, 400, { error: 'the body is not JSON' });
    }
    const { name, reason, token } = fields ?? {};
    if (typeof name !== 'string' || name === '')
      return this.#json(response, 400, { error: 'name: expected a name' });
    if (typeof reason !== 'string' || reason.trim() === '')
      return this.#json(response, 400, { error: 'reason: say why (it is recorded)' });
    if (typeof token !== 'string' || !/^[1-9][0-9]*$/.test(token))
      return this.#json(response, 400, { error: 'token: the fencing token the page shows' });
    if (!provider.forceRelease)
      return this.#json(response, 501, { error: `force-release on the ${provider.backend} provider` });
    const address = request.socket.remoteAddress ?? 'unknown address';
    const removed = await provider.forceRelease(name, {
      reason,
      by: `${operator} (dashboard, from ${address})`,
      fencingToken: BigInt(token),
    });
    poller.poke();
    this.#json(response, 200, { name, released: removed ? holderJson(removed) : null });
  }

  #failed(response: ServerResponse, error: unknown): void {
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const status =
      error instanceof FencekitError
        ? ((
            { INVALID_ARGUMENT: 400, BACKEND_UNAVAILABLE: 503, NOT_IMPLEMENTED: 501 } as Record<
              string,
              number
            >
          )[error.code] ?? 500)
        : 500;
    const message = error instanceof FencekitError ? `${error.message} [${error.code}]` : 'internal error';
    this.#json(response, status, { error: processSecrets.text(message) });
  }

  #json(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (response.headersSent) return;
    response.writeHead(status, {
      ...SECURITY_HEADERS,
      ...headers,
      'content-type': 'application/json; charset=utf-8',
    });
    response.end(JSON.stringify(body));
  }
}

/** The request's body as text, or undefined when it is larger than MAX_BODY_BYTES. */
async function readBody(request: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

const signatures = new WeakMap<DashboardState, string>();

/** What a state says apart from the clock (the look's time, ages, time left): once per state. */
function signature(state: DashboardState): string {
  let text = signatures.get(state);
  if (text === undefined) {
    text = JSON.stringify(state, (key, value) =>
      key === 'at' || key === 'ageMs' || key === 'expiresInMs' ? undefined : value,
    );
    signatures.set(state, text);
  }
  return text;
}
