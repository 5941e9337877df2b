import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { advisoryKey, fencedUpdate, withXactLock, xactLock } from '../../adapters/postgres/index.js';
// @ts-expect-error: a plain .mjs example without types
import { campaignTick, setup } from '../../examples/pg-singleton-cron.mjs';
import { connect, type LockLostError } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { postgresFixture } from '../servers/postgres-fixture.js';

const negative = (name: string) => advisoryKey(name) < 0n;

describe('PostgreSQL adapter on a real server', () => {
  const server = postgresFixture();
  const open = server.open.bind(server);

  it('connect("postgres://…") opens a provider; inspect shows the owner and token', async () => {
    const provider = await connect(server.url);
    try {
      expect(provider.backend).toBe('postgres');
      const key = uniqueKey('connect');
      const lock = await provider.acquire(key, { owner: 'host-1/pid-42' });
      const info = await provider.inspect(key);
      expect(info?.holder).toMatchObject({ owner: 'host-1/pid-42', fencingToken: lock.fencingToken });
      await lock.release();
    } finally {
      await provider.close();
    }
  });

  it('pg_terminate_backend of the holder: its signal aborts at once and the next waiter is granted', async () => {
    const [a, b] = [open(), open()];
    const key = uniqueKey('terminate');
    const lock = await a.acquire(key);
    const waiting = b.acquire(key, { waitMs: 10_000 });
    await eventually('waiter queued in PostgreSQL', async () => (await b.inspect(key))?.waiters === 1);
    const { classid, objid } = {
      classid: Number(BigInt.asUintN(64, advisoryKey(key)) >> 32n),
      objid: Number(BigInt.asUintN(64, advisoryKey(key)) & 0xffffffffn),
    };
    const killed = await server.admin.query(
      `SELECT pg_terminate_backend(pid) FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid::bigint = $1 AND objid::bigint = $2`,
      [classid, objid],
    );
    expect(killed.rowCount).toBe(1);
    await eventually('signal aborted', async () => lock.signal.aborted, 2_000);
    expect((lock.signal.reason as LockLostError).reason).toBe('connection-lost');
    const next = await waiting;
    expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
    await next.release();
    await lock.release(); // harmless after the loss
  });

  it('list() finds names whose advisory key is negative and positive (SQL sha256 key = advisoryKey)', async () => {
    const provider = open();
    const prefix = `${uniqueKey('list-keys')}/`;
    // Names until both signs are covered, so the SQL's bigint shift of a high classid is exercised.
    const names: string[] = [];
    for (let i = 0; i < 64 && !(names.some(negative) && names.some((n) => !negative(n))); i++) {
      names.push(`${prefix}n${i}`);
    }
    expect(names.some(negative) && names.some((n) => !negative(n))).toBe(true);
    const locks = await Promise.all(names.map((name) => provider.acquire(name)));
    expect(await provider.list(prefix)).toEqual([...names].sort());
    await Promise.all(locks.map((lock) => lock.release()));
    expect(await provider.list(prefix)).toEqual([]);
    await provider.close();
  });

  it('tokens are durable: they keep rising across provider restarts', async () => {
    const key = uniqueKey('durable');
    const first = open();
    const t1 = (await first.acquire(key)).fencingToken;
    await first.close();
    const second = open();
    const lock = await second.acquire(key);
    expect(lock.fencingToken).toBe(t1 + 1n);
    await second.close();
    const { rows } = await server.admin.query('SELECT token FROM fencekit_fencing_tokens WHERE name = $1', [
      key,
    ]);
    expect(rows[0].token).toBe(String(t1 + 1n));
  });

  it('withXactLock: one transaction at a time, tokens from the same counter, released at COMMIT', async () => {
    const key = uniqueKey('xact');
    const provider = open();
    const session = await provider.acquire(key);
    await session.release();
    const c1 = new pg.Client({ connectionString: server.url });
    const c2 = new pg.Client({ connectionString: server.url });
    await Promise.all([c1.connect(), c2.connect()]);
    try {
      let inside = false;
      const grants: bigint[] = [];
      const work = (client: pg.Client) =>
        withXactLock(client, key, async ({ fencingToken }) => {
          expect(inside).toBe(false);
          inside = true;
          grants.push(fencingToken);
          await new Promise((r) => setTimeout(r, 50));
          inside = false;
        });
      await Promise.all([work(c1), work(c2)]);
      expect(grants.sort()).toEqual([session.fencingToken + 1n, session.fencingToken + 2n]);
      // Try form: busy while another transaction holds it.
      await c1.query('BEGIN');
      expect(await xactLock(c1, key)).not.toBeNull();
      expect(await withXactLock(c2, key, async () => 'ran', { wait: false })).toBeNull();
      await c1.query('COMMIT');
      expect(await withXactLock(c2, key, async () => 'ran', { wait: false })).toBe('ran');
      // A throw rolls back the work, but not the token: it stays used (taken outside the transaction).
      const before = (
        await server.admin.query('SELECT token FROM fencekit_fencing_tokens WHERE name = $1', [key])
      ).rows[0].token;
      await expect(
        withXactLock(c1, key, async () => {
          throw new Error('work failed');
        }),
      ).rejects.toThrow('work failed');
      const after = (
        await server.admin.query('SELECT token FROM fencekit_fencing_tokens WHERE name = $1', [key])
      ).rows[0].token;
      expect(BigInt(after)).toBe(BigInt(before) + 1n);
    } finally {
      await Promise.all([c1.end(), c2.end()]);
    }
  });

  it('fencedUpdate applies newer and equal tokens, refuses older ones, and can throw', async () => {
    await server.admin.query(
      'CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint)',
    );
    await server.admin.query('INSERT INTO accounts VALUES (1, 100, NULL)');
    const update = (token: bigint, balance: number, extra = {}) =>
      fencedUpdate(server.admin, { table: 'accounts', set: { balance }, where: { id: 1 }, token, ...extra });
    expect(await update(5n, 90)).toBe(true);
    expect(await update(5n, 80)).toBe(true); // the same grant writing again
    expect(await update(5n, 70, { strict: true })).toBe(false);
    expect(await update(4n, 0)).toBe(false);
    await expect(update(3n, 0, { throwIfStale: true })).rejects.toMatchObject({
      code: 'STALE_FENCING_TOKEN',
      token: 3n,
      highestAccepted: 5n,
    });
    expect(await update(6n, 60)).toBe(true);
    const { rows } = await server.admin.query('SELECT balance, fence_token FROM accounts WHERE id = 1');
    expect(rows[0]).toEqual({ balance: 60, fence_token: '6' });
    await expect(
      fencedUpdate(server.admin, {
        table: 'accounts',
        set: {},
        where: { id: 2 },
        token: 9n,
        throwIfStale: true,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'where' });
    await expect(
      fencedUpdate(server.admin, { table: 'accounts; DROP TABLE x', set: {}, where: { id: 1 }, token: 1n }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'table' });
  });

  it('singleton cron: three replicas run the tick at the same moment, each email goes out once', async () => {
    const replicas = await Promise.all(
      ['a', 'b', 'c'].map(async (name) => {
        const client = new pg.Client({ connectionString: server.url });
        await client.connect();
        return { name, client };
      }),
    );
    try {
      await setup(server.admin);
      await server.admin.query(
        `INSERT INTO campaign_users SELECT g, 'u' || g || '@example.com' FROM generate_series(1, 20) g ON CONFLICT DO NOTHING`,
      );
      const sent: number[] = [];
      const send = async (user: number) => {
        sent.push(user);
      };
      for (const campaignId of [1, 2, 3]) {
        const results = await Promise.all(
          replicas.map(({ name, client }) => campaignTick(client, { campaignId, replica: name, send })),
        );
        expect(results.filter((r: number | null) => r !== null).length).toBeGreaterThanOrEqual(1);
        // A second round (a replica that was late) sends nothing new.
        await Promise.all(
          replicas.map(({ name, client }) => campaignTick(client, { campaignId, replica: name, send })),
        );
      }
      expect(sent).toHaveLength(60);
      const { rows } = await server.admin.query(
        'SELECT count(*)::int AS n, count(DISTINCT (user_id, campaign_id))::int AS d FROM campaign_emails',
      );
      expect(rows[0]).toEqual({ n: 60, d: 60 });
    } finally {
      await Promise.all(replicas.map(({ client }) => client.end()));
    }
  });
});
