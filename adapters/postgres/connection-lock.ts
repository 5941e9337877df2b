import { OwnedLock } from '../../src/ownership.js';
import type { Checkout } from './checkout.js';

/** A provider's holding connections and how it checks them. */
export interface Holding {
  /** Connections holding grants (the provider's abandon() drops them, as a crash would). */
  readonly connections: Set<Checkout>;
  readonly healthIntervalMs: number;
  readonly healthTimeoutMs: number;
}

/** A grant held by its own connection: a lock's advisory key, or a semaphore's slots. */
export interface ConnectionGrant {
  lock: { key: string; fencingToken: bigint; ownerToken: string };
  /** The statement that releases the grant on its connection, and its deadline. */
  release: { sql: string; values: unknown[]; what: string; timeoutMs: number };
  /** Tells the name's waiters in this process that the grant is gone (released or lost). */
  freed(): void;
}

/**
 * The lock of a grant that lives as long as its connection: released by one statement on it (a
 * release left unconfirmed closes the connection, which frees the grant on the server), lost when
 * the connection ends or fails a health check (`SELECT 1` every healthIntervalMs).
 */
export function connectionLock(conn: Checkout, holding: Holding, grant: ConnectionGrant): OwnedLock {
  const { release } = grant;
  let healthTimer: NodeJS.Timeout | undefined;
  const lock = new OwnedLock({
    ...grant.lock,
    releaseOnBackend: async () => {
      if (conn.done) return; // the connection is gone, and the grant with it
      try {
        await conn.query(release.sql, release.values, release.timeoutMs, release.what);
        conn.giveBack();
      } catch {
        conn.discard(); // unconfirmed: closing the connection frees the grant on the server
      }
      grant.freed();
    },
  });
  const lost = () => {
    if (!lock.held) return;
    lock.lose('connection-lost');
    conn.discard();
    grant.freed();
  };
  conn.onLost(lost);
  holding.connections.add(conn);
  const check = async () => {
    try {
      await conn.query('SELECT 1', [], holding.healthTimeoutMs, 'health check');
      if (lock.held) healthTimer = setTimeout(check, holding.healthIntervalMs);
    } catch {
      lost();
    }
  };
  healthTimer = setTimeout(check, holding.healthIntervalMs);
  lock.onEnd(() => {
    clearTimeout(healthTimer);
    holding.connections.delete(conn);
  });
  return lock;
}
