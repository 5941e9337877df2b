import { EventEmitter } from 'node:events';
import type { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { FolderView } from '../../adapters/etcd/folder-view.js';
import { eventually } from '../../src/testing/index.js';

// The folder view's watch, confirmed and broken in the same tick (before the awaited race returns):
// the break must rebuild the view (a new read and watch), not go unheard while the view goes live
// on a dead watch. A fake client: no server, no timing.

class FakeWatcher extends EventEmitter {
  cancel = async () => undefined;
}

function fakeClient() {
  const watchers: FakeWatcher[] = [];
  let reads = 0;
  const builder = {
    prefix: () => builder,
    startRevision: () => builder,
    watcher: () => {
      const watcher = new FakeWatcher();
      watchers.push(watcher);
      // The first watch is confirmed and broken at once; the next ones are confirmed and stay.
      const first = watchers.length === 1;
      queueMicrotask(() => {
        watcher.emit('connected');
        if (first) watcher.emit('disconnected', new Error('stream reset'));
      });
      return watcher;
    },
  };
  const client = {
    kv: {
      range: async () => {
        reads += 1;
        return { header: { revision: '10' }, kvs: [] };
      },
    },
    watch: () => builder,
  };
  return { client: client as unknown as Etcd3, watchers, reads: () => reads };
}

describe('etcd folder view', () => {
  it('a watch broken right after its confirmation rebuilds the view (a new read and watch)', async () => {
    const fake = fakeClient();
    const view = new FolderView(fake.client, Buffer.from('/semaphore/x/'), 1_000, () => undefined);
    const unlisten = view.listen({ changed: () => undefined, failed: () => undefined });
    await eventually(
      'the view was built again',
      async () => fake.watchers.length === 2 && !!view.state,
      5_000,
    );
    expect(fake.reads()).toBe(2);
    unlisten();
  });
});
