import { afterAll, beforeAll } from 'vitest';
import type { LockProvider } from '../../src/index.js';
import { FaultProxy } from './fault-proxy.js';
import { endpoint, startServers } from './index.js';
import type { ServerGroup } from './types.js';

/**
 * One Redis or PostgreSQL server for a describe block, each provider reaching it through a fault
 * proxy of its own so that a test can cut one provider off: the setup of the conformance suites.
 * Call it inside describe(); the server and the proxies go after the block.
 */
export function proxiedServer(kind: 'redis' | 'postgres') {
  let group: ServerGroup | undefined;
  const proxies = new Map<LockProvider, FaultProxy>();
  beforeAll(async () => {
    group = await startServers(kind);
  });
  afterAll(async () => {
    await Promise.all([...proxies.values()].map((p) => p.close()));
    await group?.stop();
  });
  /** The server's own URL. */
  const serverUrl = (): URL => {
    if (!group) throw new Error('proxiedServer: the server is there only after beforeAll');
    if (kind === 'postgres') return new URL(endpoint(group, 'PG_URL'));
    return new URL(`redis://${endpoint(group, 'REDIS_HOSTS').split(',')[0]}`);
  };
  return {
    /** Starts a proxy to the server; `make` gets the URL that goes through it. */
    async through<P extends LockProvider>(make: (url: string) => P): Promise<P> {
      const url = serverUrl();
      const proxy = await FaultProxy.start({ host: url.hostname, port: Number(url.port) });
      url.port = String(proxy.port);
      const provider = make(url.toString());
      proxies.set(provider, proxy);
      return provider;
    },
    /**
     * The conformance suites' partition fault: the provider's connections go silent. With
     * `serverNoticesMs`, they are reset that much later, as the server's TCP keepalive would.
     */
    partition(serverNoticesMs?: number) {
      return async (provider: LockProvider, cut: boolean): Promise<void> => {
        const proxy = proxies.get(provider);
        if (!proxy) return;
        if (!cut) {
          proxy.setMode({ kind: 'pass' });
          return;
        }
        proxy.setMode({ kind: 'blackhole' });
        if (serverNoticesMs !== undefined) setTimeout(() => proxy.cutAll(), serverNoticesMs).unref();
      };
    },
  };
}
