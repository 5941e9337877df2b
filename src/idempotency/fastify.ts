import {
  type Answer,
  attachContext,
  failWhenDestroyed,
  type HttpIdempotencyOptions,
  type HttpStart,
  keptHeaders,
  leaveWhenClientGone,
  startIdempotentRequest,
} from './http-core.js';
import type { IdempotencyStore } from './store.js';

// Structural types: fastify is a dev dependency only, users bring their own.
interface FastifyRequestLike {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
}
interface FastifyReplyLike {
  raw: {
    destroy(error?: Error): unknown;
    once(event: 'close', listener: () => void): unknown;
    writableFinished?: boolean;
    closed?: boolean;
    destroyed?: boolean;
  };
  statusCode: number;
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  removeHeader(name: string): FastifyReplyLike;
  getHeaders(): Record<string, number | string | string[] | undefined>;
  send(payload?: unknown): FastifyReplyLike;
}
interface FastifyLike {
  addHook(name: string, hook: (...args: never[]) => unknown): unknown;
}

/** Options of {@link idempotencyPlugin}. */
export interface IdempotencyPluginOptions extends HttpIdempotencyOptions {
  store: IdempotencyStore;
}

/** A run, and the undo of its watch on the raw response (see failWhenDestroyed). */
type Run = Extract<HttpStart, { kind: 'run' }> & { unwatch(): void };

/**
 * Fastify plugin: `app.register(idempotencyPlugin, { store })`. Applies to every route of the
 * instance it is registered on (it skips Fastify's encapsulation, as fastify-plugin does).
 */
async function plugin(app: FastifyLike, options: IdempotencyPluginOptions): Promise<void> {
  const runs = new WeakMap<object, Run>();
  app.addHook('preHandler', (async (request: FastifyRequestLike, reply: FastifyReplyLike) => {
    const header = request.headers['idempotency-key'];
    const start = await startIdempotentRequest(options.store, options, {
      method: request.method,
      url: request.url,
      key: Array.isArray(header) ? header.join(',') : header,
      body: request.body,
    });
    if (start.kind === 'run') {
      runs.set(request, { ...start, unwatch: failWhenDestroyed(reply.raw, start.fail) });
      leaveWhenClientGone(reply.raw, start.clientGone);
      attachContext(request, start.context);
    }
    if (start.kind === 'answer') return apply(reply, start.answer);
  }) as never);
  app.addHook('onSend', (async (request: FastifyRequestLike, reply: FastifyReplyLike, payload: unknown) => {
    const run = runs.get(request);
    if (!run) return payload;
    runs.delete(request);
    run.unwatch();
    if (
      typeof payload !== 'string' &&
      !Buffer.isBuffer(payload) &&
      payload !== null &&
      payload !== undefined
    ) {
      // A stream cannot be stored: the key is freed as the response starts, and a repeat runs the
      // handler again (with a higher fencing token).
      run.fail();
      return payload;
    }
    const body = payload === null || payload === undefined ? Buffer.alloc(0) : Buffer.from(payload);
    const replacement = await run.finish({
      status: reply.statusCode,
      headers: keptHeaders(reply.getHeaders(), options.keepHeaders),
      body: body.toString('base64'),
    });
    if (!replacement) return payload;
    reply.code(replacement.status);
    reply.removeHeader('content-length');
    for (const [name, value] of Object.entries(replacement.headers)) reply.header(name, value);
    return replacement.body;
  }) as never);
  const abandon = (async (request: FastifyRequestLike) => {
    const run = runs.get(request);
    runs.delete(request);
    run?.unwatch();
    run?.fail();
  }) as never;
  // After onSend, a run still listed never handed a storable response over. A client abort is not
  // such an end (and fires no onResponse): the handler goes on, and its response is stored for the
  // retry if it comes within the lease (see leaveWhenClientGone). A handler writing to reply.raw
  // itself never reaches onSend: its run ends with the response, or with the lease if the client
  // goes first.
  app.addHook('onResponse', abandon);
}

function apply(reply: FastifyReplyLike, answer: Answer): FastifyReplyLike {
  reply.code(answer.status);
  for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value);
  return reply.send(answer.body);
}

(plugin as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')] = true;
(plugin as unknown as Record<symbol, unknown>)[Symbol.for('fastify.display-name')] = 'fencekit-idempotency';

/** The Fastify plugin: `app.register(idempotencyPlugin, { store })` guards the routes' handlers. */
export const idempotencyPlugin = plugin;
