import { createHash } from 'node:crypto';

/**
 * Lock names → PostgreSQL advisory lock keys. fencekit uses the single-bigint form
 * (`pg_advisory_lock(bigint)`): the two-int form would leave 32 bits for the name (collisions become
 * likely past ~10,000 names), while 64 bits keep the odds of any collision among n names at about
 * n² / 2⁶⁵ (1 in 37 million for a million names).
 *
 * key = the first 8 bytes of SHA-256("fencekit:" + name), read as a signed big-endian int8.
 * The "fencekit:" prefix keeps names away from the small integers applications pass to
 * pg_advisory_lock themselves. Two names that do collide simply exclude each other (never unsafe,
 * only slower); their fencing tokens stay separate, because the token table is keyed by name.
 */
export function advisoryKey(name: string): bigint {
  const digest = createHash('sha256').update(`fencekit:${name}`, 'utf8').digest();
  return digest.readBigInt64BE(0);
}

/** pg_locks shows a bigint advisory key as classid (high 32 bits), objid (low 32 bits), objsubid 1. */
export function lockRowIds(key: bigint): { classid: number; objid: number } {
  const unsigned = BigInt.asUintN(64, key);
  return { classid: Number(unsigned >> 32n), objid: Number(unsigned & 0xffffffffn) };
}

/**
 * SQL: whether backend `pid` holds the bigint advisory key `key` (SQL expressions both), in either
 * mode. A grant row is live while its pid holds its key: the lock dies with its connection.
 */
export function heldBy(pid: string, key: string): string {
  return `EXISTS (SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.pid = ${pid}
      AND ((l.classid::bigint << 32) | l.objid::bigint) = ${key})`;
}
