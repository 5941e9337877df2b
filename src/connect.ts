import type { ConnectOptions } from './connect-options.js';
import { type ConnectionSpec, parseConnectionUrl } from './connection-url.js';
import { BackendUnavailableError } from './errors.js';
import { MemoryLockProvider, memoryServer } from './memory/provider.js';
import { processSecrets } from './secret-mask.js';
import { resolveTls } from './tls.js';
import type { BackendName, LockProvider } from './types.js';
import { urlCredentials } from './url-display.js';

/**
 * The client package each backend needs (optional peer dependencies); null: none, fencekit speaks
 * the backend's protocol itself (ZooKeeper, see adapters/zookeeper/wire).
 */
export const BACKEND_PACKAGES: Record<Exclude<BackendName, 'memory'>, string | null> = {
  etcd: 'etcd3',
  zookeeper: null,
  redis: 'ioredis',
  redlock: 'ioredis',
  postgres: 'pg',
};

/**
 * What {@link connect} resolves with: a {@link LockProvider} whose `forceRelease`, `list`, `queue`,
 * `on` and `off`, optional for a provider of your own, are present, as on every built-in provider
 * (Redlock's `queue` refuses with NotImplementedError).
 * `semaphore` is present on every built-in provider but Redlock's; {@link ConnectedSemaphoreProvider}
 * is what `connect` gives when the URL's scheme shows it.
 */
export type ConnectedProvider = LockProvider &
  Required<Pick<LockProvider, 'forceRelease' | 'list' | 'queue' | 'on' | 'off'>>;

/** A {@link ConnectedProvider} with semaphores: every built-in provider but Redlock's. */
export type ConnectedSemaphoreProvider = ConnectedProvider & Required<Pick<LockProvider, 'semaphore'>>;

/** A connection URL (lower-case scheme) of a backend whose provider has semaphores. */
export type SemaphoreBackendUrl =
  `${'memory' | 'etcd' | 'zk' | 'zookeeper' | 'redis' | 'redis+cluster' | 'rediss' | 'rediss+cluster' | 'postgres' | 'postgresql'}://${string}`;

/** Each adapter entry point exports `createProvider(spec, options)`. */
export interface AdapterModule {
  createProvider(spec: ConnectionSpec, options: ConnectOptions): Promise<ConnectedProvider>;
}

/**
 * Opens a provider for the backend the URL names. Switching an app from Redis to etcd is a change of
 * this URL and nothing else. A backend whose client package is not installed fails with an error
 * that names the package.
 *
 * With a URL whose scheme is known as you write it (`'etcd://…'`), the provider is typed with
 * `semaphore`; with a URL from configuration (`string`) it may be Redlock's, which has none, so
 * check `provider.semaphore` before you use it.
 * @param url - `memory://[name]`, `etcd://`, `zk://`, `redis://`, `redis+cluster://` (`rediss://` for TLS), `redlock://`
 * or `postgres://`.
 * @param options - defaults for every acquire, telemetry, and the backend's own options.
 */
export function connect(
  url: SemaphoreBackendUrl,
  options?: ConnectOptions,
): Promise<ConnectedSemaphoreProvider>;
export function connect(url: string, options?: ConnectOptions): Promise<ConnectedProvider>;
export async function connect(url: string, options: ConnectOptions = {}): Promise<ConnectedProvider> {
  const spec = parseConnectionUrl(url);
  processSecrets.add(urlCredentials(url));
  if (spec.backend === 'memory') {
    return new MemoryLockProvider({ ...options, server: memoryServer(spec.path) });
  }
  const peer = BACKEND_PACKAGES[spec.backend];
  if (peer) await requirePeer(peer, spec.backend);
  // PostgreSQL's adapter reads the option beside the URL's sslmode= (src/postgres-tls.ts): as given.
  const tls = spec.backend === 'postgres' ? options.tls : await resolveTls(spec, options.tls);
  const adapter = await loadAdapter(spec.backend);
  return adapter.createProvider(spec, { ...options, tls });
}

/** Imports an optional peer dependency, or explains how to install it. */
export async function requirePeer(packageName: string, backend: string): Promise<void> {
  try {
    await import(packageName);
  } catch (error) {
    if (isModuleNotFound(error)) {
      throw new BackendUnavailableError(
        `the ${backend} backend needs the package "${packageName}", which is not installed: npm install ${packageName}`,
        { cause: error },
      );
    }
    throw error;
  }
}

function isModuleNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
}

// Lazy: core never loads an adapter (or its client package) unless the URL asks for it.
function loadAdapter(backend: Exclude<BackendName, 'memory'>): Promise<AdapterModule> {
  switch (backend) {
    case 'etcd':
      return import('../adapters/etcd/index.js');
    case 'zookeeper':
      return import('../adapters/zookeeper/index.js');
    case 'redis':
    case 'redlock':
      return import('../adapters/redis/index.js');
    case 'postgres':
      return import('../adapters/postgres/index.js');
  }
}
