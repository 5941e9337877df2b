import { getEventListeners } from 'node:events';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { callWithin } from '../../src/deadline.js';
import { BackendUnavailableError } from '../../src/errors.js';

/** A promise that never settles: only the deadline or the signal can end a wait for it. */
const never = () => new Promise<never>(() => undefined);

/** A promise the test settles by hand. */
function deferred<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const abortListeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

/** Active timers of this process (setTimeout and setInterval). */
const activeTimers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

describe('callWithin', () => {
  it('settles like the call: its value, its error, whether given a promise or a function', async () => {
    await expect(callWithin(Promise.resolve(7), { timeoutMs: 60_000, what: 'x' })).resolves.toBe(7);
    await expect(callWithin(async () => 8, { timeoutMs: 60_000, what: 'x' })).resolves.toBe(8);
    const failure = new Error('refused');
    await expect(callWithin(Promise.reject(failure), { timeoutMs: 60_000, what: 'x' })).rejects.toBe(failure);
    await expect(
      callWithin(
        () => {
          throw failure; // a function that throws instead of rejecting
        },
        { timeoutMs: 60_000, what: 'x' },
      ),
    ).rejects.toBe(failure);
  });

  it('at the deadline: BackendUnavailableError naming the backend, what was asked and the time', async () => {
    const named = callWithin(never(), { timeoutMs: 20, what: 'reading the queue', backend: 'etcd' });
    await expect(named).rejects.toThrow(BackendUnavailableError);
    await expect(named).rejects.toThrow(/^etcd: reading the queue: no answer within 20 ms$/);
    // Without a backend the message starts with what was asked.
    await expect(callWithin(never(), { timeoutMs: 20, what: 'semaphore inspect' })).rejects.toThrow(
      /^semaphore inspect: no answer within 20 ms$/,
    );
  });

  it("a function's signal aborts at the deadline, with the timeout as its reason", async () => {
    let given: AbortSignal | undefined;
    const call = callWithin(
      (signal) => {
        given = signal;
        return never();
      },
      { timeoutMs: 20, what: 'x', backend: 'postgres' },
    );
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect(given?.aborted).toBe(true);
    expect(given?.reason).toBe(error);
  });

  it('Infinity is no limit: the call settles when it does', async () => {
    const late = deferred<string>();
    const call = callWithin(late.promise, { timeoutMs: Number.POSITIVE_INFINITY, what: 'x' });
    await sleep(30);
    late.resolve('answered');
    await expect(call).resolves.toBe('answered');
  });

  it('a signal aborted before: rejects with its reason and never starts a function', async () => {
    const controller = new AbortController();
    const reason = new Error('cancelled');
    controller.abort(reason);
    let started = false;
    const call = callWithin(
      async () => {
        started = true;
      },
      { timeoutMs: 60_000, signal: controller.signal, what: 'x' },
    );
    await expect(call).rejects.toBe(reason);
    expect(started).toBe(false);
    await expect(
      callWithin(never(), { timeoutMs: 60_000, signal: controller.signal, what: 'x' }),
    ).rejects.toBe(reason);
  });

  it("a signal aborted while waiting: rejects with its reason at once; a function's signal aborts with it", async () => {
    const controller = new AbortController();
    const reason = new Error('cancelled');
    let given: AbortSignal | undefined;
    const call = callWithin(
      (signal) => {
        given = signal;
        return never();
      },
      { timeoutMs: Number.POSITIVE_INFINITY, signal: controller.signal, what: 'x' },
    );
    const waiting = callWithin(never(), {
      timeoutMs: Number.POSITIVE_INFINITY,
      signal: controller.signal,
      what: 'x',
    });
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(given?.reason).toBe(reason);
  });

  it('an abort after the call settled changes nothing', async () => {
    const controller = new AbortController();
    const call = callWithin(Promise.resolve('done'), {
      timeoutMs: 60_000,
      signal: controller.signal,
      what: 'x',
    });
    await expect(call).resolves.toBe('done');
    controller.abort(new Error('too late'));
    await expect(call).resolves.toBe('done');
  });

  it('many calls on one long-lived signal leave no listener and no timer behind, however each ends', async () => {
    const shared = new AbortController();
    const { signal } = shared;
    const timersBefore = activeTimers();
    const limits = { timeoutMs: 60_000, signal, what: 'x' };
    const answered = Array.from({ length: 100 }, () => deferred<number>());
    const waits = [
      ...answered.map((d) => callWithin(d.promise, limits)),
      ...answered.map((d) => callWithin(() => d.promise, limits)),
      ...Array.from({ length: 50 }, () =>
        callWithin(never(), { ...limits, timeoutMs: 10 }).catch(() => 'late'),
      ),
      ...Array.from({ length: 50 }, () =>
        callWithin(() => never(), { ...limits, timeoutMs: 10 }).catch(() => 'late'),
      ),
      ...Array.from({ length: 50 }, () =>
        callWithin(Promise.reject(new Error('no')), limits).catch(() => 'no'),
      ),
    ];
    // While they wait, the signal has their listeners (the check below would see a leak).
    expect(abortListeners(signal)).toBeGreaterThan(0);
    answered.forEach((d, i) => {
      d.resolve(i);
    });
    await Promise.all(waits);
    expect(abortListeners(signal)).toBe(0);
    // 300 calls with a 60 s limit settled long before it: none of their timers is left running.
    expect(activeTimers() - timersBefore).toBeLessThan(10);
  });

  it('calls ended by an abort of their own signal leave nothing on a shared parent either', async () => {
    const parent = new AbortController();
    const waits = Array.from({ length: 50 }, () => {
      const own = new AbortController();
      const call = callWithin(() => never(), { timeoutMs: 60_000, signal: own.signal, what: 'x' });
      own.abort(new Error('cancelled'));
      return call.catch(() => undefined);
    });
    // linkSignals children of the parent, as a request's signal derives from a session's.
    const derived = Array.from({ length: 50 }, () =>
      callWithin(() => never(), { timeoutMs: 10, signal: parent.signal, what: 'x' }).catch(() => undefined),
    );
    await Promise.all([...waits, ...derived]);
    expect(abortListeners(parent.signal)).toBe(0);
  });

  describe('the late rejection of work given up on', () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    beforeEach(() => {
      unhandled.length = 0;
      process.on('unhandledRejection', record);
    });
    afterEach(() => {
      process.off('unhandledRejection', record);
    });

    it('is not unhandled, after a timeout or an abort, for a promise or a function', async () => {
      const late = [deferred<never>(), deferred<never>(), deferred<never>(), deferred<never>()];
      const [byTimeout, byTimeoutFn, byAbort, byAbortFn] = late as [
        ReturnType<typeof deferred<never>>,
        ReturnType<typeof deferred<never>>,
        ReturnType<typeof deferred<never>>,
        ReturnType<typeof deferred<never>>,
      ];
      const controller = new AbortController();
      const limits = { timeoutMs: 10, what: 'x' };
      const calls = [
        callWithin(byTimeout.promise, limits),
        callWithin(() => byTimeoutFn.promise, limits),
        callWithin(byAbort.promise, { ...limits, timeoutMs: 60_000, signal: controller.signal }),
        callWithin(() => byAbortFn.promise, { ...limits, timeoutMs: 60_000, signal: controller.signal }),
      ];
      // Each rejection is handled here at once: only a rejection callWithin left alone may be unhandled.
      const outcomes = calls.map((call) =>
        call.then(
          () => 'resolved',
          () => 'rejected',
        ),
      );
      controller.abort(new Error('cancelled'));
      expect(await Promise.all(outcomes)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
      for (const d of late) d.reject(new Error('the late answer'));
      // Unhandled rejections are reported after the microtasks of the turn: two turns on, they would be.
      await nextTurn();
      await nextTurn();
      expect(unhandled).toEqual([]);
    });

    it('of a promise given to a signal already aborted is not unhandled either', async () => {
      const late = deferred<never>();
      await expect(
        callWithin(late.promise, {
          timeoutMs: 60_000,
          signal: AbortSignal.abort(new Error('no')),
          what: 'x',
        }),
      ).rejects.toThrow('no');
      late.reject(new Error('the late answer'));
      await nextTurn();
      await nextTurn();
      expect(unhandled).toEqual([]);
    });
  });
});
