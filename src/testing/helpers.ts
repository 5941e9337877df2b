import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { Lock, LockProvider } from '../types.js';

export const sleep = (ms: number): Promise<void> => delay(ms);

/** A key no other test (or earlier run against the same server) uses. */
export function uniqueKey(label: string): string {
  return `fencekit-conformance/${label}/${crypto.randomUUID()}`;
}

/** What releasing a grant that may have been lost is allowed to reject with. */
const STALE_RELEASE_CODES = new Set(['BACKEND_UNAVAILABLE', 'NOT_HOLDER', 'LOCK_LOST']);

/**
 * Releases a grant that may have been lost (cut off, expired, taken over): it may resolve, or
 * reject with a typed error saying the release could not be confirmed or was no longer ours;
 * anything else (an untyped error, another code) fails the test.
 */
export async function releaseStale(grant: { release(): Promise<void> }): Promise<void> {
  try {
    await grant.release();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    assert.ok(
      typeof code === 'string' && STALE_RELEASE_CODES.has(code),
      `a stale release rejected with ${String(code)}: ${String(error)}`,
    );
  }
}

/** Polls until check() is true, failing with `what` after timeoutMs. */
export async function eventually(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await sleep(10);
  }
}

/** Waits until inspect() reports `count` waiters on key. */
export function waitersReach(provider: LockProvider, key: string, count: number): Promise<void> {
  return eventually(
    `${count} waiters on ${key}`,
    async () => ((await provider.inspect(key))?.waiters ?? 0) === count,
  );
}

/** Asserts that `promise` rejects with a FencekitError of the given code (or name). */
export async function rejectsWith(promise: Promise<unknown>, code?: string): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    const e = error as Error & { code?: string };
    if (code !== undefined) {
      assert.ok(
        e.code === code || e.name === code,
        `expected ${code}, got ${e.name} ${e.code}: ${e.message}`,
      );
    }
    return e;
  }
  assert.fail(`expected a rejection with ${code}, but it resolved`);
}

/**
 * Watches critical sections: throws if a grant enters while another grant whose signal is not
 * aborted is inside, and checks that tokens rise strictly in grant order.
 */
export class ExclusionMonitor {
  readonly #inside = new Set<Lock>();
  #lastToken = -1n;
  entries = 0;

  enter(lock: Lock): void {
    for (const other of this.#inside) {
      assert.ok(
        other.signal.aborted,
        `overlap: token ${lock.fencingToken} granted while token ${other.fencingToken} was still held`,
      );
    }
    assert.ok(lock.fencingToken > this.#lastToken, `token ${lock.fencingToken} after ${this.#lastToken}`);
    this.#lastToken = lock.fencingToken;
    this.#inside.add(lock);
    this.entries += 1;
  }

  exit(lock: Lock): void {
    this.#inside.delete(lock);
  }
}

/**
 * A wait cut off from its backend still ends on time: `waitMs: 300` ends with a timeout or
 * BackendUnavailableError within 1.5 s more, and an abort at 100 ms ends it within 1.5 s more.
 */
export async function assertCutOffWaitsEnd(
  acquire: (options: { waitMs?: number; signal?: AbortSignal }) => Promise<unknown>,
): Promise<void> {
  let started = performance.now();
  const error = await rejectsWith(acquire({ waitMs: 300 }));
  const waited = performance.now() - started;
  assert.ok(
    ['LOCK_TIMEOUT', 'BACKEND_UNAVAILABLE'].includes((error as { code?: string }).code ?? ''),
    `ended with ${error.message}`,
  );
  assert.ok(waited < 300 + 1_500, `waitMs 300 ended only after ${Math.round(waited)} ms`);
  const controller = new AbortController();
  started = performance.now();
  const aborted = acquire({ signal: controller.signal });
  setTimeout(() => controller.abort(new Error('stop')), 100);
  await rejectsWith(aborted, 'AbortError');
  const took = performance.now() - started;
  assert.ok(took < 100 + 1_500, `an abort at 100 ms ended the wait only after ${Math.round(took)} ms`);
}
