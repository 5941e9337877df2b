// Types of etcd-call-count.mjs, for the tests that count etcd calls with it.
export interface EtcdCallCounts {
  /** Unary calls by `<service>.<method>` (KV.txn, KV.range, Lease.leaseGrant, …). */
  calls: Record<string, number>;
  /** Watches created (client.watch()). */
  watches: number;
  /** Keepalive streams opened (a session's own timer). */
  keepalives: number;
}
export interface EtcdCallCounter {
  /** Counts since the last take(), and starts counting afresh. */
  take(): EtcdCallCounts;
}
/** Counts the calls of an etcd3 client (an `Etcd3`; its pool is a private field). */
export function countEtcdCalls(client: unknown): EtcdCallCounter;
