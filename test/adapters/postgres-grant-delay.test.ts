import { describe, expect, it } from 'vitest';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { postgresFixture } from '../servers/postgres-fixture.js';

const MARKERS = '"fencekit_fencing_tokens_grantdelay"';

/** Lock-delay markers of semaphore and read-write grants (adapters/postgres/lock-delay.ts). */
describe('PostgreSQL lock-delay of semaphores and read-write locks: the markers', () => {
  const server = postgresFixture();
  const open = server.open.bind(server);
  const markers = async (names: string[]) =>
    (
      await server.admin.query<{ name: string; lost: boolean }>(
        `SELECT name, lost_at IS NOT NULL AS lost FROM ${MARKERS} WHERE name = ANY($1::text[])`,
        [names],
      )
    ).rows;

  it('a clean release deletes its marker; a lost grant leaves one', async () => {
    const [a, b] = [open(), open()];
    const [s, rw] = [uniqueKey('release-sem'), uniqueKey('release-rw')];
    const names = [`/semaphore/${s}`, `/rwlock/${rw}`];
    const permit = await a.semaphore(s, { limit: 2 }).acquire({ lockDelayMs: 60_000 });
    const write = await a.readWriteLock(rw).acquireWrite({ lockDelayMs: 60_000 });
    expect((await markers(names)).map((m) => m.lost)).toEqual([false, false]);
    await permit.release();
    await write.release();
    expect(await markers(names)).toEqual([]);
    // Lost: the markers stay, and the next look at the name starts their delay.
    await a.semaphore(s, { limit: 2 }).acquire({ permits: 2, lockDelayMs: 60_000 });
    await a.readWriteLock(rw).acquireRead({ lockDelayMs: 60_000 });
    await a.abandon();
    // The tries that find the grants gone (once the server has seen the connection close) stamp them.
    await eventually('the markers stamped', async () => {
      expect(await b.semaphore(s, { limit: 2 }).tryAcquire()).toBeNull();
      expect(await b.readWriteLock(rw).tryAcquireWrite()).toBeNull();
      const left = await markers(names);
      return left.length === 2 && left.every((m) => m.lost);
    });
    const read = await b.readWriteLock(rw).tryAcquireRead();
    expect(read?.held).toBe(true);
    await read?.release();
  });

  it('the markers of lost grants on names nobody uses again are cleaned by other grants with a delay', async () => {
    const [a, b] = [open(), open()];
    const [s, rw] = [uniqueKey('leftover-sem'), uniqueKey('leftover-rw')];
    const names = [`/semaphore/${s}`, `/rwlock/${rw}`];
    await a.semaphore(s, { limit: 3 }).acquire({ lockDelayMs: 100 });
    await a.readWriteLock(rw).acquireWrite({ lockDelayMs: 100 });
    await a.abandon();
    // Each grant that writes a marker stamps other names' lost markers, and deletes the ended ones.
    const other = b.semaphore(uniqueKey('cleaner'), { limit: 1 });
    const otherRw = b.readWriteLock(uniqueKey('cleaner-rw'));
    await eventually(
      'the left-over markers deleted',
      async () => {
        await (await other.acquire({ lockDelayMs: 1 })).release();
        await (await otherRw.acquireRead({ lockDelayMs: 1 })).release();
        return (await markers(names)).length === 0;
      },
      30_000,
    );
  });

  it('a stamped marker counts although its pid now holds the name again (a pid reused by a reader)', async () => {
    const [a, b] = [open(), open()];
    const rw = uniqueKey('reused-pid');
    const name = `/rwlock/${rw}`;
    const read = await a.readWriteLock(rw).acquireRead({ lockDelayMs: 60_000 });
    // A lost write's marker, stamped, whose pid is the live reader's (as when the lost holder's
    // backend pid was given to a new session that reads the same name): it still counts.
    await server.admin.query(
      `INSERT INTO ${MARKERS} (name, token, mode, held, pid, delay_ms, lost_at)
       SELECT name, token + 1000000, 'write', held, pid, 60000, clock_timestamp() FROM ${MARKERS}
        WHERE name = $1`,
      [name],
    );
    try {
      expect(await b.readWriteLock(rw).tryAcquireRead()).toBeNull(); // a lost write keeps readers out
      expect((await b.readWriteLock(rw).inspect()).delayed.map((d) => d.mode)).toEqual(['write']);
    } finally {
      await server.admin.query(`DELETE FROM ${MARKERS} WHERE name = $1 AND mode = 'write'`, [name]);
    }
    await read.release();
  });
});
