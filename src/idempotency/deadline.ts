import { AbortError, BackendUnavailableError, FencekitError } from '../errors.js';

/**
 * Runs one store call with a deadline and the caller's signal: it rejects with
 * BackendUnavailableError when the server has not answered within `ms` (or the client failed to
 * reach it), with AbortError when `signal` aborts. The call itself may still finish on the server;
 * every call is written so that a late one is harmless (fenced by token).
 */
export async function within<T>(
  what: string,
  ms: number,
  signal: AbortSignal | undefined,
  call: () => Promise<T>,
): Promise<T> {
  if (signal?.aborted) throw new AbortError(what, signal.reason);
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new BackendUnavailableError(`${what}: the store did not answer within ${ms} ms`)),
      ms,
    );
    onAbort = () => reject(new AbortError(what, signal?.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  const attempt = call().catch((error: unknown) => {
    if (error instanceof FencekitError) throw error;
    throw new BackendUnavailableError(`${what}: ${(error as Error)?.message ?? String(error)}`, {
      cause: error,
    });
  });
  try {
    return await Promise.race([attempt, stop]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    attempt.catch(() => undefined); // a late failure of a call we gave up on is not unhandled
  }
}
