import type { FencekitError } from '../errors.js';
import { FinalError, type IdempotencyInFlightError } from './errors.js';
import { type IdempotencyStore, leaveToLease, type RunContext } from './store.js';
import { validateIdempotencyKey } from './validate.js';

/** Options of the Express middleware and the Fastify plugin. */
export interface HttpIdempotencyOptions {
  /** Answer 400 when a covered request has no key (default true); false lets it through unguarded. */
  required?: boolean;
  /** Methods the key applies to (default POST and PATCH, as the draft suggests). */
  methods?: string[];
  /** Response headers stored and replayed besides the status and body (default content-type, location). */
  keepHeaders?: string[];
  leaseMs?: number;
  retentionMs?: number;
  /** Wait this long for an in-flight first request instead of answering 409 (default 0). */
  waitMs?: number;
}

/** A response as it is stored: status, the kept headers, the body bytes (base64). */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export type HttpStart =
  | { kind: 'pass' }
  | { kind: 'answer'; answer: Answer }
  | {
      kind: 'run';
      /** What the handler may use: pass fencingToken to storage that checks it; stop when signal aborts. */
      context: IdempotencyContext;
      /** Hands the handler's response over; resolves with a replacement to send, or null to send it. */
      finish(response: StoredResponse): Promise<Answer | null>;
      /** The handler gave no response we can store (aborted, streamed): the key is freed. */
      fail(): void;
      /**
       * The client went away before the response was handed over: the run is left to its lease (see
       * leaveWhenClientGone).
       */
      clientGone(): void;
    };

const NOT_STORED = Symbol('not stored');

/** What a handler behind the middleware gets from `idempotencyContext(request)`. */
export interface IdempotencyContext {
  /** The request's idempotency key. */
  key: string;
  /** The run's fencing token: pass it to storage that checks tokens. */
  fencingToken: bigint;
  /** Aborts when the run's lease is lost: stop the side effects. */
  signal: AbortSignal;
}

const contexts = new WeakMap<object, IdempotencyContext>();

/**
 * The run behind a request the middleware let through (Express `req`, Fastify `request`): its key,
 * fencing token and lease signal; undefined for requests the middleware did not cover.
 */
export function idempotencyContext(request: object): IdempotencyContext | undefined {
  return contexts.get(request);
}

export function attachContext(request: object, context: IdempotencyContext): void {
  contexts.set(request, context);
}

function problem(status: number, title: string, detail: string, extra: Record<string, string> = {}): Answer {
  return {
    status,
    headers: { 'content-type': 'application/problem+json', ...extra },
    body: Buffer.from(JSON.stringify({ type: 'about:blank', title, status, detail })),
  };
}

function answerFromError(error: unknown): Answer {
  const code = (error as FencekitError | undefined)?.code as string | undefined;
  const detail = (error as Error)?.message ?? String(error);
  switch (code) {
    case 'INVALID_ARGUMENT':
      return problem(400, 'Bad Idempotency-Key', detail);
    case 'IDEMPOTENCY_MISMATCH':
      return problem(422, 'Idempotency-Key reused with a different request', detail);
    case 'IDEMPOTENCY_IN_FLIGHT':
      return problem(409, 'A request with this Idempotency-Key is being processed', detail, {
        'retry-after': String(
          Math.max(1, Math.ceil((error as IdempotencyInFlightError).retryAfterMs / 1000)),
        ),
      });
    case 'STALE_FENCING_TOKEN':
      return problem(409, 'This request was taken over by a retry', detail);
    case 'BACKEND_UNAVAILABLE':
      return problem(503, 'The idempotency store is unavailable', detail);
    default:
      return problem(500, 'Internal Server Error', 'the idempotency check failed');
  }
}

function fromStored(stored: StoredResponse, replayed: boolean): Answer {
  return {
    status: stored.status,
    headers: replayed ? { ...stored.headers, 'idempotency-replayed': 'true' } : stored.headers,
    body: Buffer.from(stored.body, 'base64'),
  };
}

/** What both frameworks share: read the key, start or replay, and map outcomes to the draft's answers. */
export async function startIdempotentRequest(
  store: IdempotencyStore,
  options: HttpIdempotencyOptions,
  request: { method: string; url: string; key: string | undefined; body: unknown; unparsedBody?: boolean },
): Promise<HttpStart> {
  const methods = (options.methods ?? ['POST', 'PATCH']).map((m) => m.toUpperCase());
  if (!methods.includes(request.method.toUpperCase())) return { kind: 'pass' };
  if (request.key === undefined) {
    if (options.required === false) return { kind: 'pass' };
    return {
      kind: 'answer',
      answer: problem(400, 'Idempotency-Key is missing', 'this operation requires an Idempotency-Key header'),
    };
  }
  if (request.unparsedBody)
    return {
      kind: 'answer',
      answer: problem(
        415,
        'Unsupported Media Type',
        'the request body was not parsed, so it cannot be compared with the first request of this Idempotency-Key',
      ),
    };
  let payload: unknown;
  let key: string;
  try {
    key = validateIdempotencyKey(headerKey(request.key));
    const body = Buffer.isBuffer(request.body) ? { base64: request.body.toString('base64') } : request.body;
    payload = { method: request.method.toUpperCase(), url: request.url, body: body ?? null };
    store.hash(payload);
  } catch (error) {
    return { kind: 'answer', answer: answerFromError(error) };
  }

  let started!: (context: IdempotencyContext) => void;
  const whenStarted = new Promise<IdempotencyContext>((resolve) => {
    started = resolve;
  });
  let hand!: (response: StoredResponse | typeof NOT_STORED) => void;
  const handed = new Promise<StoredResponse | typeof NOT_STORED>((resolve) => {
    hand = resolve;
  });
  let runContext: RunContext | undefined;
  const execution = store
    .execute(
      key,
      payload,
      async (context) => {
        runContext = context;
        started({ key, fencingToken: context.fencingToken, signal: context.signal });
        const response = await handed;
        // A 5xx or a response we could not capture is not the answer: throwing frees the key for a retry.
        if (response === NOT_STORED) throw new Error('response not stored');
        if (response.status >= 500) throw new UnstoredResponse(response);
        return response;
      },
      { leaseMs: options.leaseMs, retentionMs: options.retentionMs, waitMs: options.waitMs },
    )
    .then(
      (result) => ({ ok: true as const, result }),
      (error: unknown) => ({ ok: false as const, error }),
    );
  const first = await Promise.race([whenStarted, execution]);
  if (!('fencingToken' in first)) {
    if (first.ok) return { kind: 'answer', answer: fromStored(first.result.value, first.result.replayed) };
    const error = first.error;
    if (error instanceof FinalError)
      return { kind: 'answer', answer: problem(error.status ?? 400, 'Error', error.message) };
    return { kind: 'answer', answer: answerFromError(error) };
  }
  let settled = false;
  let gone = false;
  return {
    kind: 'run',
    context: first,
    async finish(response) {
      settled = true;
      hand(response);
      const outcome = await execution;
      if (outcome.ok) return null;
      if (outcome.error instanceof UnstoredResponse) return null;
      return answerFromError(outcome.error);
    },
    fail() {
      // After the client went away, a destroyed response is the disconnect's doing (stream.pipeline
      // destroys both ends): the run stays left to its lease.
      if (settled || gone) return;
      settled = true;
      hand(NOT_STORED);
    },
    clientGone() {
      if (settled || gone || !runContext) return;
      gone = true;
      leaveToLease(runContext);
      // Once the lease is no longer ours, nothing the handler does later can be stored: the run ends
      // (its record is freed if still ours, a repeat may already have taken it over).
      const lease = runContext.signal;
      if (lease.aborted) hand(NOT_STORED);
      else lease.addEventListener('abort', () => hand(NOT_STORED), { once: true });
    },
  };
}

/**
 * A client that disconnects before the response was handed over does not stop the handler, which
 * may already have had its effect: freeing the key would let the client's retry run it a second
 * time. Renewing the lease until the handler ends would leave the key in flight for as long as the
 * process lives when the response never ends: a body piped into it is unpiped when the connection
 * closes. So the run is left to its lease, as if the process had crashed: a response ended within
 * the lease is still stored and replayed; after it, the key is freed and a retry runs the handler
 * again with a higher fencing token (storage that checks the token refuses the first run's late
 * writes). The caller registers this on the response's 'close' before its handler runs. The start
 * (a store call, or up to waitMs) may outlast the client: a response already closed then fired its
 * 'close' before anyone listened, so the run is left to its lease at once.
 */
export function leaveWhenClientGone(
  response: {
    once(event: 'close', listener: () => void): unknown;
    writableFinished?: boolean;
    closed?: boolean;
    destroyed?: boolean;
  },
  clientGone: () => void,
): void {
  if (response.closed || response.destroyed) {
    if (!response.writableFinished) clientGone();
    return;
  }
  response.once('close', () => {
    if (!response.writableFinished) clientGone();
  });
}

/**
 * Frees the key when server code destroys the response before handing it over: a handler whose
 * body fails after its headers went out can only cut the response off (stream.pipeline destroys
 * it), and a destroyed response never ends, so it can never be stored. A client that disconnects
 * does not go through destroy(): its handler goes on, and its response is still stored for the
 * retry. Returns the undo, for when the response is handed over.
 */
export function failWhenDestroyed(
  response: { destroy(error?: Error): unknown },
  fail: () => void,
): () => void {
  const destroy = response.destroy;
  response.destroy = function destroyed(this: unknown, error?: Error) {
    fail();
    return destroy.call(this, error);
  };
  return () => {
    response.destroy = destroy;
  };
}

/**
 * The draft makes the header a Structured Field string (`Idempotency-Key: "8e03…"`): the quotes and
 * escapes are taken off, so a quoted and a bare key are the same key.
 */
function headerKey(value: string): string {
  const quoted = /^"((?:[^"\\]|\\["\\])*)"$/.exec(value.trim());
  return quoted ? (quoted[1] as string).replace(/\\(["\\])/g, '$1') : value;
}

/** Carries a 5xx response out of fn without storing it. */
class UnstoredResponse extends Error {
  constructor(readonly response: StoredResponse) {
    super(`status ${response.status} is not stored`);
  }
}

export function keptHeaders(
  all: Record<string, number | string | string[] | undefined>,
  keep: string[] | undefined,
): Record<string, string> {
  const names = (keep ?? ['content-type', 'location']).map((h) => h.toLowerCase());
  const kept: Record<string, string> = {};
  for (const name of names) {
    const value = all[name];
    if (value !== undefined) kept[name] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return kept;
}
