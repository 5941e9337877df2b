import { afterAll, beforeAll } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { endpoint, startServers } from './index.js';
import type { ServerGroup } from './types.js';

type ZooKeeperOptions = ConstructorParameters<typeof ZooKeeperLockProvider>[0];

/**
 * A single ZooKeeper for the tests of one describe block (started before them, stopped after), and
 * providers on it that are closed at the end. Call it inside describe().
 */
export function zookeeperFixture(defaults: Partial<ZooKeeperOptions> = {}) {
  let server: ServerGroup | undefined;
  let connectString = '';
  const providers: ZooKeeperLockProvider[] = [];
  beforeAll(async () => {
    server = await startServers('zookeeper');
    connectString = endpoint(server, 'ZK_CONNECT');
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await server?.stop();
  });
  return {
    /** The server's host:port list (after beforeAll). */
    get connectString(): string {
      return connectString;
    },
    /** A provider on the server with the fixture's defaults, closed after the describe block. */
    open(options: Partial<ZooKeeperOptions> = {}): ZooKeeperLockProvider {
      const provider = new ZooKeeperLockProvider({ connectString, ...defaults, ...options });
      providers.push(provider);
      return provider;
    },
  };
}
