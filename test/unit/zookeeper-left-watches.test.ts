import { describe, expect, it } from 'vitest';
import { MAX_LEFT_WATCHES, mayLeaveWatch } from '../../adapters/zookeeper/mutex.js';
import type { ZkClient, ZkState } from '../../adapters/zookeeper/wire/client.js';

/** A client that only reports its state changes. */
function fakeClient() {
  const listeners = new Set<(state: ZkState) => void>();
  const client = {
    onState(listener: (state: ZkState) => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  } as unknown as ZkClient;
  const reconnect = () => {
    for (const listener of listeners) listener('disconnected');
  };
  return { client, reconnect };
}

// The server keeps a next-in-line waiter's watch on an absent marker path until the connection
// ends: a connection leaves such watches on at most MAX_LEFT_WATCHES paths.
describe('ZooKeeper marker watches left on one connection', () => {
  it('are bounded per connection; a path already left costs nothing; a new connection starts afresh', () => {
    const { client, reconnect } = fakeClient();
    for (let i = 0; i < MAX_LEFT_WATCHES; i++) expect(mayLeaveWatch(client, `/f${i}/m`)).toBe(true);
    expect(mayLeaveWatch(client, '/one-more/m')).toBe(false);
    expect(mayLeaveWatch(client, '/f7/m'), 'its watch is there already').toBe(true);
    expect(mayLeaveWatch(fakeClient().client, '/one-more/m'), 'another client').toBe(true);
    reconnect();
    expect(mayLeaveWatch(client, '/one-more/m')).toBe(true);
  });
});
