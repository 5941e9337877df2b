export { ZkElection } from './election.js';
export { queueOrder } from './mutex.js';
export { createProvider, ZooKeeperLockProvider, type ZooKeeperProviderOptions } from './provider.js';
