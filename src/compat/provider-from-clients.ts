import { InvalidArgumentError } from '../errors.js';
import type { LockProvider } from '../types.js';

/** Whether value is a fencekit provider (else the facades take it for Redis clients). */
export function isProvider(value: unknown): value is LockProvider {
  const p = value as Partial<LockProvider> | null;
  return (
    typeof p?.acquire === 'function' && typeof p.tryAcquire === 'function' && typeof p.backend === 'string'
  );
}

/**
 * A provider over Redis clients as redlock and redis-semaphore take them: one client → a Redis lock on it; three or
 * more independent instances → Redlock. The redis adapter is imported only here, on first use, so
 * the facade over etcd or ZooKeeper needs no ioredis.
 */
export async function openProvider(clients: unknown[]): Promise<LockProvider> {
  if (clients.length === 0)
    throw new InvalidArgumentError('clients', 'Redlock needs at least one Redis client');
  if (clients.length === 2) {
    throw new InvalidArgumentError(
      'clients',
      'two instances cannot outvote one failure: pass one, or three or more',
    );
  }
  const { RedisLockProvider, RedlockProvider } = await import('../../adapters/redis/index.js');
  // biome-ignore lint/suspicious/noExplicitAny: clients are the app's ioredis or node-redis clients, checked by the adapter
  const any = clients as any[];
  return clients.length === 1
    ? new RedisLockProvider({ client: any[0] })
    : new RedlockProvider({ instances: any });
}
