import { afterAll, beforeAll } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { FaultProxy } from './fault-proxy.js';
import { endpoint, startServers } from './index.js';
import type { ServerGroup } from './types.js';

type EtcdOptions = ConstructorParameters<typeof EtcdLockProvider>[0];

/**
 * A single etcd for the tests of one describe block (started before them, stopped after), and
 * providers on it that are closed at the end. Call it inside describe().
 */
export function etcdFixture(defaults: Partial<EtcdOptions> = {}) {
  let server: ServerGroup | undefined;
  let endpoints = '';
  const providers: EtcdLockProvider[] = [];
  beforeAll(async () => {
    server = await startServers('etcd');
    endpoints = endpoint(server, 'ETCD_ENDPOINTS');
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await server?.stop();
  });
  return {
    /** The server's endpoints, comma-separated URLs (after beforeAll). */
    get endpoints(): string {
      return endpoints;
    },
    /** A provider on the server with the fixture's defaults, closed after the describe block. */
    open(options: Partial<EtcdOptions> = {}): EtcdLockProvider {
      const provider = new EtcdLockProvider({ endpoints: endpoints.split(','), ...defaults, ...options });
      providers.push(provider);
      return provider;
    },
    /** Runs a test with a fault proxy in front of the (single) etcd, closed afterwards. */
    async throughProxy(run: (proxy: FaultProxy) => Promise<void>): Promise<void> {
      const [host, port] = endpoints.replace('http://', '').split(':');
      const proxy = await FaultProxy.start({ host: host as string, port: Number(port) });
      try {
        await run(proxy);
      } finally {
        await proxy.close();
      }
    },
  };
}
