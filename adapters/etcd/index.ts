export { EtcdElection } from './election.js';
export type { GuardedTxnResult } from './guarded-txn.js';
export { namePrefix } from './keys.js';
export { createProvider, EtcdLockProvider, type EtcdProviderOptions } from './provider.js';
