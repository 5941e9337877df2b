import { BackendUnavailableError, InvalidArgumentError } from './errors.js';
import { MemoryLockProvider, memoryServer } from './memory/provider.js';
import type { ProviderDefaults } from './provider-base.js';
import type { BackendName, LockProvider } from './types.js';

export interface HostPort {
  host: string;
  port: number;
}

/** A connection URL taken apart; what each adapter's factory receives. */
export interface ConnectionSpec {
  backend: BackendName;
  url: string;
  hosts: HostPort[];
  username: string | undefined;
  password: string | undefined;
  /** The path without its leading '/': Redis db number, PostgreSQL database, ZooKeeper chroot, memory name. */
  path: string;
  params: URLSearchParams;
}

export interface ConnectOptions extends ProviderDefaults {
  /** Backend-specific options passed through to the adapter (TLS, auth, timeouts …). */
  [option: string]: unknown;
}

const DEFAULT_PORTS: Record<Exclude<BackendName, 'memory'>, number> = {
  etcd: 2379,
  zookeeper: 2181,
  redis: 6379,
  redlock: 6379,
  postgres: 5432,
};

const SCHEMES: Record<string, BackendName> = {
  memory: 'memory',
  etcd: 'etcd',
  zk: 'zookeeper',
  zookeeper: 'zookeeper',
  redis: 'redis',
  'redis+cluster': 'redis',
  redlock: 'redlock',
  postgres: 'postgres',
  postgresql: 'postgres',
};

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

const URL_SHAPE = /^([a-z][a-z0-9+.-]*):\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/i;

/**
 * Takes a connection URL apart. Unlike WHATWG URL it accepts several comma-separated hosts
 * (`etcd://h1:2379,h2:2379`). Every error says what is wrong with which part.
 */
export function parseConnectionUrl(url: string): ConnectionSpec {
  if (typeof url !== 'string' || url.trim() === '')
    throw new InvalidArgumentError('url', 'must be a non-empty string');
  const match = URL_SHAPE.exec(url.trim());
  if (!match)
    throw new InvalidArgumentError(
      'url',
      `"${redact(url)}" is not of the form scheme://host[:port][/path][?query]`,
    );
  const [, rawScheme = '', userinfo, hostList = '', rawPath = '', query = ''] = match;
  const scheme = rawScheme.toLowerCase();
  const backend = SCHEMES[scheme];
  if (!backend) {
    throw new InvalidArgumentError(
      'url',
      `unknown scheme "${scheme}://"; use one of ${Object.keys(SCHEMES)
        .map((s) => `${s}://`)
        .join(', ')}`,
    );
  }
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    username = decode(colon < 0 ? userinfo : userinfo.slice(0, colon), 'user name') || undefined;
    password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1), 'password');
  }
  const path = decode(rawPath.replace(/^\//, ''), 'path');
  const spec: ConnectionSpec = {
    backend,
    url,
    hosts: [],
    username,
    password,
    path,
    params: new URLSearchParams(query),
  };
  if (backend === 'memory') {
    if (hostList !== '' && path !== '')
      throw new InvalidArgumentError('url', 'memory:// takes one name: memory://name');
    spec.path = hostList || path;
    return spec;
  }
  if (hostList === '') throw new InvalidArgumentError('url', `${scheme}:// needs at least one host`);
  spec.hosts = hostList.split(',').map((entry) => parseHostPort(entry, DEFAULT_PORTS[backend]));
  if (backend === 'redlock' && spec.hosts.length < 3) {
    throw new InvalidArgumentError(
      'url',
      `redlock:// needs at least 3 independent hosts, got ${spec.hosts.length}`,
    );
  }
  if (scheme === 'redis+cluster' && path !== '') {
    throw new InvalidArgumentError('url', 'redis+cluster:// takes no database number (a Cluster has only 0)');
  }
  if (scheme === 'redis' && spec.hosts.length !== 1) {
    throw new InvalidArgumentError(
      'url',
      'redis:// takes one host; use redlock:// for several independent instances, redis+cluster:// for a Redis Cluster',
    );
  }
  if (backend === 'redis' && path !== '' && !/^\d+$/.test(path)) {
    throw new InvalidArgumentError('url', `redis:// path must be a database number, got "${path}"`);
  }
  if (backend === 'postgres' && spec.hosts.length !== 1) {
    throw new InvalidArgumentError('url', 'postgres:// takes one host');
  }
  return spec;
}

function parseHostPort(entry: string, defaultPort: number): HostPort {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]\s]+)(?::(\d{1,5}))?$/i.exec(entry);
  if (!m || m[1] === undefined)
    throw new InvalidArgumentError('url', `"${entry}" is not a host or host:port`);
  const port = m[2] === undefined ? defaultPort : Number(m[2]);
  if (port < 1 || port > 65535)
    throw new InvalidArgumentError('url', `port ${port} of "${entry}" is out of range`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port };
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new InvalidArgumentError('url', `the ${what} has a malformed %-escape`);
  }
}

/** The URL with any password replaced, for error messages. */
export function redact(url: string): string {
  return url.replace(/^([^:]+:\/\/[^:@/]*:)[^@/]*@/, '$1***@');
}

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
