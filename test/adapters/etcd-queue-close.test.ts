import { describe, expect, it } from 'vitest';
import { markerKey } from '../../adapters/etcd/lock-delay.js';
import { ProviderClosedError } from '../../src/errors.js';
import { uniqueKey } from '../../src/testing/index.js';
import { etcdFixture } from '../servers/etcd-fixture.js';

// queue() reads a running lock-delay's lease to say when the delay ends. Like the Txn before it, that
// read ends with close()'s reason, not callTimeoutMs later with an outage.
describe('etcd: queue() in flight when the provider closes', () => {
  const etcd = etcdFixture({ callTimeoutMs: 60_000 });

  it('a lock-delay lease read that etcd does not answer ends with the close’s reason', async () => {
    const provider = etcd.open();
    const key = uniqueKey('queue-close');
    const { client } = provider;
    // A running delay: the marker on a lease, as a head that found a lost holder stamps it.
    const lease = await client.leaseClient.leaseGrant({ TTL: 60, ID: '0' });
    await client.put(markerKey('', key)).value('delay 60000').lease(lease.ID).exec();
    let asked: () => void = () => undefined;
    const leaseRead = new Promise<void>((resolve) => {
      asked = resolve;
    });
    // etcd keeps the lease read unanswered: only the close can end queue() before callTimeoutMs.
    client.leaseClient.leaseTimeToLive = () => {
      asked();
      return new Promise(() => undefined);
    };
    const reading = provider.queue(key);
    reading.catch(() => undefined); // awaited below
    await leaseRead;
    const closing = provider.close();
    const outcome = await Promise.race([
      reading.then(
        () => 'answered',
        (error: unknown) => error,
      ),
      closing.then(() => 'still reading after close() resolved'),
    ]);
    expect(outcome).toBeInstanceOf(ProviderClosedError);
    await closing;
  });
});
