/**
 * The Redis, Redis Cluster and Redlock providers.
 * @module fencekit/redis
 */
import type { ConnectOptions } from '../../src/connect-options.js';
import type { ConnectionSpec } from '../../src/connection-url.js';
import { createProvider as createRedisProvider, type RedisLockProvider } from './provider.js';
import { RedlockProvider, type RedlockProviderOptions } from './redlock.js';

export { RedisLockProvider, type RedisProviderOptions } from './provider.js';
export { RedlockProvider, type RedlockProviderOptions } from './redlock.js';

/** redis:// → RedisLockProvider; redlock://h1:p1,h2:p2,h3:p3 → RedlockProvider. */
export async function createProvider(
  spec: ConnectionSpec,
  options: ConnectOptions,
): Promise<RedisLockProvider | RedlockProvider> {
  if (spec.backend !== 'redlock') return createRedisProvider(spec, options);
  // An ACL user (user:password@) as well as a password alone (:password@).
  const user = spec.username === undefined ? '' : encodeURIComponent(spec.username);
  const auth =
    spec.password === undefined ? (user ? `${user}@` : '') : `${user}:${encodeURIComponent(spec.password)}@`;
  return new RedlockProvider({
    ...(options as Partial<RedlockProviderOptions>),
    instances: spec.hosts.map(
      (h) => `redis://${auth}${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`,
    ),
    ...(spec.params.has('prefix') ? { prefix: spec.params.get('prefix') as string } : {}),
  });
}
