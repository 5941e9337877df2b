/**
 * The ZooKeeper provider, over fencekit's own protocol client: Curator's node layout.
 * @module fencekit/zookeeper
 */
export { ZkElection } from './election.js';
export { queueOrder } from './mutex.js';
export { createProvider, ZooKeeperLockProvider, type ZooKeeperProviderOptions } from './provider.js';
