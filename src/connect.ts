import { type ConnectionSpec, parseConnectionUrl } from './connection-url.js';
import { BackendUnavailableError } from './errors.js';
import { MemoryLockProvider, memoryServer } from './memory/provider.js';
import type { ProviderDefaults } from './provider-base.js';
import { processSecrets } from './secret-mask.js';
import type { BackendName, LockProvider } from './types.js';
import { urlCredentials } from './url-display.js';

export { type ConnectionSpec, type HostPort, parseConnectionUrl } from './connection-url.js';

export interface ConnectOptions extends ProviderDefaults {
  /** Backend-specific options passed through to the adapter (TLS, auth, timeouts …). */
  [option: string]: unknown;
}

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

/** Each adapter entry point exports `createProvider(spec, options)`. */
export interface AdapterModule {
  createProvider(spec: ConnectionSpec, options: ConnectOptions): Promise<LockProvider>;
}

/**
 * Opens a provider for the backend the URL names. Switching an app from Redis to etcd is a change of
 * this URL and nothing else. A backend whose client package is not installed fails with an error
 * that names the package.
 */
export async function connect(url: string, options: ConnectOptions = {}): Promise<LockProvider> {
  const spec = parseConnectionUrl(url);
  processSecrets.add(urlCredentials(url));
  if (spec.backend === 'memory') {
    return new MemoryLockProvider({ ...options, server: memoryServer(spec.path) });
  }
  const peer = BACKEND_PACKAGES[spec.backend];
  if (peer) await requirePeer(peer, spec.backend);
  const adapter = await loadAdapter(spec.backend);
  return adapter.createProvider(spec, options);
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
