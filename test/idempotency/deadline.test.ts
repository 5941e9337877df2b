import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AbortError, BackendUnavailableError, InvalidArgumentError } from '../../src/errors.js';
import { createIdempotencyStore } from '../../src/idempotency/create.js';
import { CallDeadlines } from '../../src/idempotency/deadline.js';
import { canonicalJson, payloadHash } from '../../src/idempotency/hash.js';

const never = () => new Promise<never>(() => undefined);

// One timer for all of a store's calls: each call still fails at its own deadline, no sooner.
describe('CallDeadlines', () => {
  it('fails a call the store does not answer with BackendUnavailableError naming it', async () => {
    const deadlines = new CallDeadlines(50, new AbortController().signal);
    const closing = new AbortController();
    const call = deadlines.run('idempotency begin', closing.signal, never);
    await expect(call).rejects.toThrow(BackendUnavailableError);
    await expect(call).rejects.toThrow(/idempotency begin: the store did not answer within 50 ms/);
  });

  it('the expiry of the oldest call leaves a younger one running; it still gets its answer', async () => {
    const closing = new AbortController();
    const deadlines = new CallDeadlines(400, closing.signal);
    let answer: (value: string) => void = () => undefined;
    const oldest = deadlines.run('oldest', closing.signal, never);
    await new Promise((r) => setTimeout(r, 200));
    const younger = deadlines.run('younger', closing.signal, () => new Promise<string>((r) => (answer = r)));
    // The younger call is answered only once the oldest has failed: the same sweep must spare it.
    const failed = await oldest.then(
      () => 'answered',
      (error: unknown) => error,
    );
    answer('stored');
    expect(failed).toBeInstanceOf(BackendUnavailableError);
    await expect(younger).resolves.toBe('stored');
  });

  it('an answer that comes after the deadline is ignored (the call already failed)', async () => {
    const closing = new AbortController();
    const deadlines = new CallDeadlines(30, closing.signal);
    let answer: (value: string) => void = () => undefined;
    const call = deadlines.run('late', closing.signal, () => new Promise<string>((r) => (answer = r)));
    await expect(call).rejects.toThrow(BackendUnavailableError);
    answer('too late');
    await expect(call).rejects.toThrow(BackendUnavailableError);
  });

  it("a caller's signal fails its own call with AbortError; failAll fails the rest (close)", async () => {
    const closing = new AbortController();
    const deadlines = new CallDeadlines(60_000, closing.signal);
    const caller = new AbortController();
    const own = deadlines.run('own', caller.signal, never);
    const other = deadlines.run('other', closing.signal, never);
    caller.abort(new Error('caller gave up'));
    await expect(own).rejects.toThrow(AbortError);
    closing.abort(new Error('closing'));
    deadlines.failAll(closing.signal.reason);
    await expect(other).rejects.toThrow(AbortError);
  });

  it('failUnder fails only the calls made under that store signal: a close spares the runs under way', async () => {
    const closing = new AbortController();
    const ending = new AbortController();
    const deadlines = new CallDeadlines(60_000, closing.signal, ending.signal);
    const start = deadlines.run('begin', closing.signal, never);
    let answer: (value: string) => void = () => undefined;
    const completion = deadlines.run(
      'complete',
      ending.signal,
      () => new Promise<string>((r) => (answer = r)),
    );
    closing.abort(new Error('closing'));
    deadlines.failUnder(closing.signal, closing.signal.reason);
    await expect(start).rejects.toThrow(AbortError);
    answer('stored');
    expect(await completion).toBe('stored');
    const late = deadlines.run('complete', ending.signal, never);
    deadlines.failAll(new Error('closed'));
    await expect(late).rejects.toThrow(AbortError);
  });

  it('calls answered out of order leave the others pending, each to its own deadline and abort', async () => {
    const closing = new AbortController();
    const deadlines = new CallDeadlines(300, closing.signal);
    const answers: ((value: string) => void)[] = [];
    const answerable = () => new Promise<string>((r) => answers.push(r));
    const calls = ['first', 'second', 'third', 'fourth'].map((what) =>
      deadlines.run(what, closing.signal, answerable),
    );
    // The middle and then the newest are answered: the oldest and the third still expire on time.
    answers[1]?.('second answered');
    answers[3]?.('fourth answered');
    await expect(calls[1]).resolves.toBe('second answered');
    await expect(calls[3]).resolves.toBe('fourth answered');
    await expect(calls[0]).rejects.toThrow(/first: the store did not answer within 300 ms/);
    await expect(calls[2]).rejects.toThrow(/third: the store did not answer within 300 ms/);
    // Answered after its expiry: ignored. A later call still gets its answer.
    answers[0]?.('too late');
    await expect(calls[0]).rejects.toThrow(BackendUnavailableError);
    const later = deadlines.run('later', closing.signal, async () => 'answered');
    await expect(later).resolves.toBe('answered');
  });

  it('client errors become BackendUnavailableError; a call made under an aborted signal is not made', async () => {
    const closing = new AbortController();
    const deadlines = new CallDeadlines(60_000, closing.signal);
    await expect(
      deadlines.run('refused', closing.signal, () => Promise.reject(new Error('ECONNREFUSED'))),
    ).rejects.toThrow(/refused: ECONNREFUSED/);
    let made = false;
    const aborted = AbortSignal.abort(new Error('gone'));
    await expect(
      deadlines.run('never made', aborted, async () => {
        made = true;
      }),
    ).rejects.toThrow(AbortError);
    expect(made).toBe(false);
  });
});

describe('payloadHash', () => {
  it('is the SHA-256 (hex) of the canonical form, for strings, bytes and objects', () => {
    const sha = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');
    expect(payloadHash('añb', canonicalJson)).toBe(sha(Buffer.from('añb', 'utf8')));
    expect(payloadHash(new Uint8Array([0, 1, 255]), canonicalJson)).toBe(sha(new Uint8Array([0, 1, 255])));
    expect(payloadHash({ b: 1, a: [2] }, canonicalJson)).toBe(sha('{"a":[2],"b":1}'));
    expect(() => payloadHash({ n: Number.NaN }, canonicalJson)).toThrow(InvalidArgumentError);
  });
});

describe('createIdempotencyStore', () => {
  it('refuses a Redis Cluster URL with a typed error instead of failing later with CROSSSLOT', async () => {
    const error = await createIdempotencyStore(' REDIS+CLUSTER://127.0.0.1:7000,127.0.0.1:7001').catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error).toMatchObject({ argument: 'url' });
    expect(String((error as Error).message)).toContain('Redis Cluster');
  });
});
