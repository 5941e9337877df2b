import type { Lock, LockProvider } from 'fencekit';

/** The promise a deliberately broken provider breaks, to prove the pipeline can go red. */
export type Unsafety = 'no-exclusion' | 'born-lost';

let counter = 0n;

/**
 * Wraps a real provider and breaks one promise: 'no-exclusion' grants every acquire at once with
 * a fresh token (two live holders); 'born-lost' hands out grants whose signal is already aborted.
 */
export function unsafeProvider(real: LockProvider, unsafety: Unsafety): LockProvider {
  const fake = (key: string, aborted: boolean): Lock => {
    const controller = new AbortController();
    if (aborted) controller.abort(new Error('lost before it was handed out'));
    const token = ++counter;
    return {
      key,
      fencingToken: token,
      ownerToken: `unsafe-${token}`,
      signal: controller.signal,
      get held() {
        return !controller.signal.aborted;
      },
      release: async () => controller.abort(new Error('released')),
      [Symbol.asyncDispose]: async () => controller.abort(new Error('released')),
    };
  };
  const acquire = async (key: string): Promise<Lock> => {
    if (unsafety === 'no-exclusion') return fake(key, false);
    const lock = await real.acquire(key);
    await lock.release();
    return fake(key, true);
  };
  return {
    backend: real.backend,
    acquire,
    tryAcquire: acquire,
    withLock: async (key, fn) => fn(await acquire(key)),
    inspect: (key) => real.inspect(key),
    close: () => real.close(),
  };
}
