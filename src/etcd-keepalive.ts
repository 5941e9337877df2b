import type { Etcd3 } from 'etcd3';

/**
 * One keepalive of lease `id` on a stream of its own, ended either way: resolves with the TTL
 * (seconds) etcd gave the lease, 0 when the lease has ended; rejects when no answer came by
 * `deadline`. Shared by the etcd adapter's sessions and the idempotency store's leases.
 */
export async function keepaliveOnce(client: Etcd3, id: string, deadline: Date): Promise<number> {
  const stream = await client.leaseClient.leaseKeepAlive({ deadline });
  try {
    return await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('etcd keepalive: no answer in time')),
        deadline.getTime() - Date.now(),
      );
      stream.on('data', (res: { TTL: string }) => {
        clearTimeout(timer);
        resolve(Number(res.TTL));
      });
      stream.on('error', (error: Error) => {
        clearTimeout(timer);
        reject(error);
      });
      stream.write({ ID: id });
    });
  } finally {
    stream.end();
  }
}
