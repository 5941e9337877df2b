import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, ProviderClosedError, StaleFencingTokenError } from '../../src/errors.js';
import {
  createIdempotencyStore,
  FinalError,
  IdempotencyInFlightError,
  IdempotencyMismatchError,
  IdempotencyStore,
} from '../../src/idempotency/index.js';
import type { RecordBackend } from '../../src/idempotency/records.js';
import { eventually } from '../../src/testing/index.js';
import { beginRun, completeRun, rawRecords, type StoreBackend, useStoreServers } from './backends.js';

const servers = useStoreServers();

const key = (label: string) => `${label}-${crypto.randomUUID()}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each<StoreBackend>(['memory', 'redis', 'postgres', 'etcd'])('idempotency store on %s', (backend) => {
  let store: IdempotencyStore;
  beforeAll(async () => {
    store = await createIdempotencyStore(servers.urls[backend], { callTimeoutMs: 2_000 });
  });
  afterAll(async () => {
    await store?.close();
  });

  it('runs fn once for a new key; a repeat gets the stored result without running it', async () => {
    const k = key('once');
    let runs = 0;
    const fn = async ({ fencingToken }: { fencingToken: bigint }) => {
      runs++;
      return { charged: 4200, token: String(fencingToken) };
    };
    const first = await store.execute(k, { order: 42, cents: 4200 }, fn);
    const again = await store.execute(k, { cents: 4200, order: 42 }, fn); // same payload, keys reordered
    expect(runs).toBe(1);
    expect(first.replayed).toBe(false);
    expect(again).toEqual({ value: first.value, replayed: true });
    expect(await store.run(key('undefined'), 1, async () => undefined)).toBeUndefined();
  });

  it('the same key with another payload is refused with IdempotencyMismatchError', async () => {
    const k = key('mismatch');
    await store.run(k, { cents: 100 }, async () => 'ok');
    const error = await store.run(k, { cents: 999 }, async () => 'other').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyMismatchError);
    expect((error as IdempotencyMismatchError).code).toBe('IDEMPOTENCY_MISMATCH');
  });

  it('a concurrent repeat gets IdempotencyInFlightError, or with waitMs the first run’s result', async () => {
    const k = key('inflight');
    let runs = 0;
    let finish!: (v: string) => void;
    const first = store.run(k, 'p', () => {
      runs++;
      return new Promise<string>((r) => {
        finish = r;
      });
    });
    await eventually('first run started', async () => runs === 1);
    const busy = await store.run(k, 'p', async () => 'second').catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(IdempotencyInFlightError);
    expect((busy as IdempotencyInFlightError).retryAfterMs).toBeGreaterThan(0);
    const waiting = store.run(k, 'p', async () => 'third', { waitMs: 5_000 });
    setTimeout(() => finish('first'), 100);
    expect(await first).toBe('first');
    expect(await waiting).toBe('first');
    expect(runs).toBe(1);
  });

  it('a FinalError is stored and replayed; any other error leaves the key free for a retry', async () => {
    const k = key('final');
    let runs = 0;
    const declined = () => {
      runs++;
      throw new FinalError('card declined', { status: 402, details: { reason: 'insufficient_funds' } });
    };
    const a = await store.run(k, 'p', declined).catch((e: unknown) => e);
    const b = await store.run(k, 'p', declined).catch((e: unknown) => e);
    expect(runs).toBe(1);
    expect(a).toBeInstanceOf(FinalError);
    expect(b).toBeInstanceOf(FinalError);
    expect(b).toMatchObject({ message: 'card declined', status: 402, replayed: true });
    expect((b as FinalError).details).toEqual({ reason: 'insufficient_funds' });

    const k2 = key('retryable');
    const flaky = await store
      .run(k2, 'p', async () => {
        throw new Error('gateway timeout');
      })
      .catch((e: unknown) => e);
    expect((flaky as Error).message).toBe('gateway timeout');
    expect(await store.run(k2, 'p', async () => 'second try')).toBe('second try');
  });

  it("fn's context is its signal and fencingToken only: a copy or a comparison sees nothing else", async () => {
    const seen = await store.run(key('context'), 'p', (context) => ({
      keys: Reflect.ownKeys({ ...context }).map(String),
      fencingToken: typeof context.fencingToken,
    }));
    expect(seen).toEqual({ keys: ['signal', 'fencingToken'], fencingToken: 'bigint' });
  });

  it('a run longer than its lease keeps it by renewal: no repeat takes over', async () => {
    const k = key('renewed');
    let runs = 0;
    const slow = store.run(
      k,
      'p',
      async ({ signal }) => {
        runs++;
        await sleep(3_000);
        return signal.aborted ? 'lost' : 'kept';
      },
      // Renewed every 400 ms: a stall of this process shorter than about 800 ms loses nothing.
      { leaseMs: 1_200 },
    );
    await sleep(2_300); // past the first lease (etcd's leases count whole seconds: 2 s there)
    const repeat = await store.run(k, 'p', async () => 'stolen', { leaseMs: 1_200 }).catch((e: unknown) => e);
    expect(repeat).toBeInstanceOf(IdempotencyInFlightError);
    expect(await slow).toBe('kept');
    expect(runs).toBe(1);
  });

  it('a stalled run past its lease is taken over with a higher token; its late completion is refused', async () => {
    const k = key('takeover');
    const zombie = rawRecords(backend, servers.urls[backend]);
    try {
      const began = await beginRun(zombie, k, store.hash('p'), 200, 60_000, 'zombie-attempt');
      expect(began.state).toBe('started');
      const zombieToken = (began as { token: bigint }).token;
      await sleep(300); // the zombie neither renews nor completes: its lease runs out
      let retryToken = 0n;
      // waitMs: etcd's leases count whole seconds, so there it runs out later.
      const value = await store.run(
        k,
        'p',
        async ({ fencingToken }) => {
          retryToken = fencingToken;
          return 'retry';
        },
        { waitMs: 10_000 },
      );
      expect(value).toBe('retry');
      expect(retryToken).toBeGreaterThan(zombieToken);
      const late = await completeRun(zombie, k, zombieToken, { kind: 'value', body: '"zombie"' }, 60_000);
      expect(late).toEqual({ stored: false, current: retryToken });
      expect(await store.execute(k, 'p', async () => 'third')).toEqual({ value: 'retry', replayed: true });
    } finally {
      await zombie.close();
    }
  });

  // etcd's counter is its revision, which no restart or key deletion takes back (etcd.test.ts).
  it.runIf(backend === 'redis' || backend === 'postgres')(
    'a lost token counter starts again above every token given: a takeover still outranks the stalled run',
    async () => {
      // A table and prefix of their own: the counter is deleted here, other tests use the default.
      const place = { table: 'fk_counter_loss', prefix: `fk-counter-loss-${crypto.randomUUID()}:` };
      const k = key('counter-loss');
      const given: bigint[] = [];
      const first = await createIdempotencyStore(servers.urls[backend], place);
      const zombie = rawRecords(backend, servers.urls[backend], place);
      try {
        for (let i = 0; i < 3; i++)
          await first.run(key('before'), 'p', ({ fencingToken }) => {
            given.push(fencingToken);
            return 'ok';
          });
        const began = await beginRun(zombie, k, first.hash('p'), 200, 60_000, 'zombie-attempt');
        expect(began.state).toBe('started');
        const zombieToken = (began as { token: bigint }).token;
        given.push(zombieToken);
        await loseTokenCounter(place);
        await sleep(300); // the zombie's lease runs out
        // A process started after the loss takes the record over.
        const restarted = await createIdempotencyStore(servers.urls[backend], place);
        let retryToken = 0n;
        try {
          expect(
            await restarted.run(k, 'p', ({ fencingToken }) => {
              retryToken = fencingToken;
              return 'retry';
            }),
          ).toBe('retry');
        } finally {
          await restarted.close();
        }
        for (const token of given) expect(retryToken).toBeGreaterThan(token);
        const late = await completeRun(zombie, k, zombieToken, { kind: 'value', body: '"zombie"' }, 60_000);
        expect(late).toEqual({ stored: false, current: retryToken });
      } finally {
        await zombie.close();
        await first.close();
      }
    },
  );

  /** A retry through a store opened afresh replays the stored value and does not run fn again. */
  async function expectReplayedByAFreshStore(key: string, value: string): Promise<void> {
    const fresh = await createIdempotencyStore(servers.urls[backend]);
    let reruns = 0;
    try {
      const retry = await fresh.execute(key, 'p', () => {
        reruns++;
        return 'charged again';
      });
      expect(retry).toEqual({ value, replayed: true });
    } finally {
      await fresh.close();
    }
    expect(reruns).toBe(0);
  }

  /** What a Redis restart without AOF, an eviction, or a dropped sequence does to the counter. */
  async function loseTokenCounter(place: { table: string; prefix: string }): Promise<void> {
    if (backend === 'redis') {
      const redis = new Redis(servers.urls.redis);
      try {
        expect(await redis.del(`${place.prefix}tokens`)).toBe(1);
      } finally {
        redis.disconnect();
      }
      return;
    }
    const client = new pg.Client({ connectionString: servers.urls.postgres });
    await client.connect();
    try {
      await client.query(`DROP SEQUENCE ${place.table}_tokens`);
    } finally {
      await client.end();
    }
  }

  it('close() lets a run in flight store its result: a fresh store replays it, fn does not run again', async () => {
    const closing = await createIdempotencyStore(servers.urls[backend], { callTimeoutMs: 10_000 });
    const k = key('close');
    let runs = 0;
    let finish: ((value: string) => void) | undefined;
    let leaseSignal: AbortSignal | undefined;
    const running = closing
      .run(k, 'p', ({ signal }) => {
        runs++;
        leaseSignal = signal;
        return new Promise<string>((resolve) => {
          finish = resolve;
        });
      })
      .catch((e: unknown) => e);
    await eventually('fn started', async () => finish !== undefined);
    const closed = closing.close();
    const refused = await closing.run(key('after-close'), 'p', () => 'never').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ProviderClosedError);
    const liveAfterClose = leaseSignal?.aborted === false; // the lease is kept while the run may store
    finish?.('charged'); // fn returns after close() was called
    expect(await running).toBe('charged');
    await closed;
    expect(liveAfterClose).toBe(true);
    await expectReplayedByAFreshStore(k, 'charged');
    expect(runs).toBe(1);
  });

  it('close() waits for a run at most callTimeoutMs: one still in fn then loses its lease, as if it crashed', async () => {
    const closing = await createIdempotencyStore(servers.urls[backend], { callTimeoutMs: 300 });
    const k = key('close-bound');
    let release: (() => void) | undefined;
    let leaseSignal: AbortSignal | undefined;
    const running = closing
      .run(
        k,
        'p',
        async ({ signal }) => {
          leaseSignal = signal;
          await new Promise<void>((r) => {
            release = r;
          });
          return 'too late';
        },
        // A lease far longer than callTimeoutMs: on a busy machine a late renewal must not end it
        // (LockLostError) before close() does. waitMs rides through a slow first start.
        { leaseMs: 5_000, waitMs: 20_000 },
      )
      .catch((e: unknown) => e);
    await eventually('fn started', async () => release !== undefined);
    await closing.close(); // resolves although fn has not returned
    expect(leaseSignal?.aborted).toBe(true);
    expect(leaseSignal?.reason).toBeInstanceOf(ProviderClosedError);
    release?.();
    expect(await running).toBeInstanceOf(ProviderClosedError); // its result was not stored
    const fresh = await createIdempotencyStore(servers.urls[backend]);
    try {
      // Nothing renews the lease any more: once it ends, a retry takes the record over and runs fn.
      expect(await fresh.run(k, 'p', () => 'retried', { waitMs: 20_000 })).toBe('retried');
    } finally {
      await fresh.close();
    }
  });

  it('close() does not cut off a completion under way when it stops waiting for runs still in fn', async () => {
    // The first completion is lost on the way (never answered): the store retries it after its
    // callTimeoutMs, which is when close() stops waiting for runs in fn. fn had returned: the effect
    // happened, so its outcome must still be stored.
    const records = rawRecords(backend, servers.urls[backend]);
    let lostCompletions = 0;
    const losingFirst: RecordBackend = {
      name: records.name,
      begin: (...args) => records.begin(...args),
      renew: (...args) => records.renew(...args),
      abandon: (...args) => records.abandon(...args),
      close: () => records.close(),
      complete: (...args) => {
        if (lostCompletions++ === 0) return new Promise<never>(() => undefined); // lost: no reply
        return records.complete(...args);
      },
    };
    const closing = new IdempotencyStore(losingFirst, { callTimeoutMs: 1_500 });
    const k = key('close-completing');
    let runs = 0;
    let finish: ((value: string) => void) | undefined;
    const running = closing
      .run(
        k,
        'p',
        () => {
          runs++;
          return new Promise<string>((resolve) => {
            finish = resolve;
          });
        },
        { leaseMs: 20_000, waitMs: 20_000 },
      )
      .catch((e: unknown) => e);
    await eventually('fn started', async () => finish !== undefined);
    const closed = closing.close();
    finish?.('charged'); // fn returns at once; its completion is what is slow
    expect(await running).toBe('charged');
    await closed;
    expect(lostCompletions).toBeGreaterThanOrEqual(2);
    await expectReplayedByAFreshStore(k, 'charged');
    expect(runs).toBe(1);
  });

  it('close() stores a run whose fn returns after close() stopped waiting for runs in fn, within its lease', async () => {
    const closing = await createIdempotencyStore(servers.urls[backend], { callTimeoutMs: 1_500 });
    const k = key('close-late-return');
    let runs = 0;
    let started = false;
    const running = closing
      .run(
        k,
        'p',
        ({ signal }) => {
          runs++;
          started = true;
          // fn returns when close() ends its wait for runs in fn (its signal aborts), long before the
          // lease ends: the charge happened, so its outcome must be stored.
          return new Promise<string>((resolve) => {
            signal.addEventListener('abort', () => resolve('charged'), { once: true });
          });
        },
        { leaseMs: 20_000, waitMs: 20_000 },
      )
      .catch((e: unknown) => e);
    await eventually('fn started', async () => started);
    await closing.close();
    expect(await running).toBe('charged');
    await expectReplayedByAFreshStore(k, 'charged');
    expect(runs).toBe(1);
  });

  it('a run whose record was taken over while it ran fails with StaleFencingTokenError', async () => {
    const k = key('superseded');
    const other = rawRecords(backend, servers.urls[backend]);
    try {
      const error = await store
        .run(
          k,
          'p',
          async () => {
            // Another process takes the record over (as after a pause): end our lease, then begin.
            await other.abandon(k, (await currentToken()) ?? 0n);
            const took = await beginRun(other, k, store.hash('p'), 60_000, 60_000, 'other-attempt');
            expect(took.state).toBe('started');
            return 'late';
          },
          { leaseMs: 5_000 },
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StaleFencingTokenError);
    } finally {
      await other.close();
    }
    // Our own token is not visible from outside fn: read it back through a takeover-free probe.
    async function currentToken(): Promise<bigint | undefined> {
      const probe = await completeRun(other, k, -1n, { kind: 'value', body: '' }, 1_000);
      return probe.stored ? undefined : (probe.current ?? undefined);
    }
  });

  it('a record is kept for retentionMs: then the key is new again, with a higher token', async () => {
    const k = key('retention');
    const tokens: bigint[] = [];
    const fn = async ({ fencingToken }: { fencingToken: bigint }) => {
      tokens.push(fencingToken);
      return tokens.length;
    };
    // Kept 1.5 s: the repeat right after finds it on a busy machine too.
    const options = { leaseMs: 100, retentionMs: 1_500 };
    expect(await store.run(k, 'first', fn, options)).toBe(1);
    expect(await store.run(k, 'first', fn, options)).toBe(1); // kept
    await sleep(1_600);
    // etcd's leases count whole seconds: there the record goes a little later.
    const again = () => store.run(k, 'another payload', fn, options);
    await eventually('the record expired', async () => (await again().catch(() => undefined)) === 2, 10_000);
    expect(tokens[1]).toBeGreaterThan(tokens[0] as bigint);
  });

  it.runIf(backend === 'postgres')('expired rows are swept from the table by a busy store', async () => {
    const k = key('sweep');
    await store.run(k, 'p', () => 'old', { leaseMs: 100, retentionMs: 200 });
    await sleep(300);
    const client = new pg.Client({ connectionString: servers.urls.postgres });
    await client.connect();
    const fresh = await createIdempotencyStore(servers.urls.postgres); // sweeps on its first begin
    try {
      const count = async () =>
        Number(
          (await client.query('SELECT count(*) FROM fencekit_idempotency WHERE key = $1', [k])).rows[0].count,
        );
      expect(await count()).toBe(1);
      await fresh.run(key('other'), 'p', () => 'x');
      await eventually('expired row swept', async () => (await count()) === 0);
    } finally {
      await fresh.close();
      await client.end();
    }
  });

  it.runIf(backend === 'postgres')('a replay only reads: it draws no token from the sequence', async () => {
    const k = key('read-only-replay');
    // A table of its own: on a server other files share (FENCEKIT_PG_URL), their keys draw tokens too.
    const own = await createIdempotencyStore(servers.urls.postgres, { table: 'fk_replay_reads' });
    await own.run(k, 'p', () => 'stored');
    const client = new pg.Client({ connectionString: servers.urls.postgres });
    await client.connect();
    try {
      const last = async () =>
        BigInt((await client.query('SELECT last_value FROM fk_replay_reads_tokens')).rows[0].last_value);
      const row = async () =>
        (await client.query('SELECT xmin::text, ctid::text FROM fk_replay_reads WHERE key = $1', [k]))
          .rows[0];
      const before = await last();
      const written = await row();
      for (let i = 0; i < 5; i++) expect(await own.run(k, 'p', () => 'again')).toBe('stored');
      expect(await last()).toBe(before);
      expect(await row()).toEqual(written); // no UPDATE, no new row version
    } finally {
      await client.end();
      await own.close();
    }
  });

  it('an option passed as undefined keeps the store default (as the HTTP middleware passes them)', async () => {
    const patient = await createIdempotencyStore(servers.urls[backend], { defaults: { waitMs: 3_000 } });
    try {
      const k = key('defaults');
      let finish!: (v: string) => void;
      const first = patient.run(k, 'p', () => new Promise<string>((r) => (finish = r)));
      await eventually('first run started', async () => finish !== undefined);
      setTimeout(() => finish('first'), 100);
      const repeat = await patient
        .run(k, 'p', () => 'second', { waitMs: undefined })
        .catch((e: unknown) => e);
      expect(repeat).toBe('first');
      await first;
    } finally {
      await patient.close();
    }
  });

  it('results go through a pluggable codec (here one that keeps bigints)', async () => {
    const codec = {
      encode: (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? `${x}n` : x)),
      decode: (t: string) =>
        JSON.parse(t, (_k, x) => (typeof x === 'string' && /^\d+n$/.test(x) ? BigInt(x.slice(0, -1)) : x)),
    };
    const custom = await createIdempotencyStore(servers.urls[backend], { codec });
    try {
      const k = key('codec');
      expect(await custom.run(k, 'p', () => ({ cents: 12n }))).toEqual({ cents: 12n });
      expect(await custom.execute(k, 'p', () => ({ cents: 99n }))).toEqual({
        value: { cents: 12n },
        replayed: true,
      });
    } finally {
      await custom.close();
    }
  });

  it('bad input is refused with typed errors before anything is stored', async () => {
    const ok = async () => 'never';
    const cases: [string, Promise<unknown>, string][] = [
      ['empty key', store.run('', 'p', ok), 'key'],
      ['key over 255 bytes', store.run('k'.repeat(256), 'p', ok), 'key'],
      ['non-printable key', store.run('a\u0007b', 'p', ok), 'key'],
      ['non-ASCII key', store.run('clé', 'p', ok), 'key'],
      ['bigint payload', store.run(key('p'), { amount: 1n }, ok), 'payload'],
      ['cyclic payload', store.run(key('p'), cyclic(), ok), 'payload'],
      ['NaN payload', store.run(key('p'), { amount: Number.NaN }, ok), 'payload'],
      [
        'retention below lease',
        store.run(key('p'), 'p', ok, { leaseMs: 10_000, retentionMs: 5_000 }),
        'retentionMs',
      ],
      ['unknown option', store.run(key('p'), 'p', ok, { ttlMs: 1 } as never), 'options'],
    ];
    for (const [what, attempt, argument] of cases) {
      const error = await attempt.catch((e: unknown) => e);
      expect(error, what).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).argument, what).toBe(argument);
    }
    if (backend === 'postgres') {
      const badTable = await createIdempotencyStore(servers.urls.postgres, {
        table: 'x; DROP TABLE y',
      }).catch((e: unknown) => e);
      expect(badTable).toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'table' });
    }
    const unstorable = key('unstorable');
    const error = await store.run(unstorable, 'p', async () => 10n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(await store.run(unstorable, 'p', async () => 'stored now')).toBe('stored now'); // key was freed
  });
});

function cyclic(): unknown {
  const a: Record<string, unknown> = { x: 1 };
  a.self = a;
  return a;
}
