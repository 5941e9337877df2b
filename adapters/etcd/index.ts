/**
 * The etcd provider: one session lease per provider, `etcdctl lock`/`elect` key layout.
 * @module fencekit/etcd
 */
export { EtcdElection } from './election.js';
export type { GuardedTxnResult } from './guarded-txn.js';
export { namePrefix } from './keys.js';
export { createProvider, EtcdLockProvider, type EtcdProviderOptions } from './provider.js';
