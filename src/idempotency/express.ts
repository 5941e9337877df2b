import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type Answer,
  attachContext,
  failWhenDestroyed,
  type HttpIdempotencyOptions,
  keptHeaders,
  leaveWhenClientGone,
  startIdempotentRequest,
} from './http-core.js';
import type { IdempotencyStore } from './store.js';

type Req = IncomingMessage & { body?: unknown; originalUrl?: string };
type Next = (error?: unknown) => void;

/**
 * Express middleware (also plain `http` shaped): put it after the body parser. The handler's
 * response is held back until it is stored, so a request whose completion is refused (it was taken
 * over) does not report success.
 */
export function idempotencyMiddleware(store: IdempotencyStore, options: HttpIdempotencyOptions = {}) {
  return (req: Req, res: ServerResponse, next: Next): void => {
    const header = req.headers['idempotency-key'];
    const key = Array.isArray(header) ? header.join(',') : header;
    // A body no parser read (missing parser, or another content type) cannot be compared: without
    // this, two different bodies under one key would count as the same request.
    const length = req.headers['content-length'];
    const hasBody =
      (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
    startIdempotentRequest(store, options, {
      method: req.method ?? 'GET',
      url: req.originalUrl ?? req.url ?? '/',
      key,
      body: req.body,
      unparsedBody: hasBody && req.body === undefined,
    }).then(
      (start) => {
        if (start.kind === 'pass') return next();
        if (start.kind === 'answer') return send(res, start.answer);
        attachContext(req, start.context);
        leaveWhenClientGone(res, start.clientGone);
        capture(res, options, start.finish, start.fail);
        next();
      },
      (error) => next(error),
    );
  };
}

function send(res: ServerResponse, answer: Answer): void {
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.setHeader('content-length', answer.body.length);
  res.end(answer.body);
}

/** Buffers what the handler writes; on end, stores it and sends it (or the replacement). */
function capture(
  res: ServerResponse,
  options: HttpIdempotencyOptions,
  finish: (r: { status: number; headers: Record<string, string>; body: string }) => Promise<Answer | null>,
  fail: () => void,
): void {
  const original = { write: res.write, end: res.end, writeHead: res.writeHead };
  const unwatchDestroy = failWhenDestroyed(res, fail);
  const chunks: Buffer[] = [];
  const toBuffer = (chunk: unknown, encoding?: unknown) =>
    Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk as string, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  const restore = () => {
    Object.assign(res, original);
    unwatchDestroy();
  };
  // A client that disconnects has not stopped the handler: its response is still stored when it
  // ends within the lease (the retry is replayed; see leaveWhenClientGone). Only a handler that
  // cannot end in a stored response frees the key.
  res.writeHead = ((status: number, ...rest: unknown[]) => {
    res.statusCode = status;
    const headers = rest.find((r) => typeof r === 'object' && r !== null) as
      | Record<string, string>
      | undefined;
    for (const [name, value] of Object.entries(headers ?? {})) res.setHeader(name, value);
    return res;
  }) as typeof res.writeHead;
  res.write = ((chunk: unknown, encoding?: unknown, cb?: unknown) => {
    if (chunk !== undefined && chunk !== null) chunks.push(toBuffer(chunk, encoding));
    const callback = [encoding, cb].find((x) => typeof x === 'function') as (() => void) | undefined;
    callback?.();
    return true;
  }) as typeof res.write;
  res.end = ((chunk?: unknown, encoding?: unknown) => {
    if (chunk !== undefined && chunk !== null && typeof chunk !== 'function')
      chunks.push(toBuffer(chunk, encoding));
    const body = Buffer.concat(chunks);
    restore();
    finish({
      status: res.statusCode,
      headers: keptHeaders(res.getHeaders(), options.keepHeaders),
      body: body.toString('base64'),
    })
      .then((replacement) => {
        if (replacement) {
          res.removeHeader('content-length');
          return send(res, replacement);
        }
        res.end(body);
      })
      .catch(() => {
        res.statusCode = 500;
        res.end();
      });
    return res;
  }) as typeof res.end;
}
