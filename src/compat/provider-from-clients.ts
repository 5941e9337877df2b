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

/** One provider per client for the redis-semaphore facade, whose apps make a Mutex per use. */
const shared = new WeakMap<object, Promise<LockProvider>>();

/**
 * The provider every facade object over `client` shares: opened on first use, closed when the
 * client ends (its 'end' event), so a Mutex per call opens no connection of its own.
 */
export function sharedProvider(client: unknown): Promise<LockProvider> {
  if (typeof client !== 'object' || client === null) return openProvider([client]);
  let provider = shared.get(client);
  if (!provider) {
    const opening = openProvider([client]);
    shared.set(client, opening);
    opening.then(
      (opened) => {
        (client as { once?: (event: string, listener: () => void) => unknown }).once?.('end', () => {
          if (shared.get(client) === opening) shared.delete(client);
          void opened.close().catch(() => undefined);
        });
      },
      () => shared.delete(client), // the next object tries again
    );
    provider = opening;
  }
  return provider;
}
