/**
 * The PostgreSQL provider (advisory locks, durable tokens), `withXactLock` and `fencedUpdate`.
 * @module fencekit/postgres
 */
export { type FencedUpdate, fencedUpdate } from './fenced-update.js';
export { advisoryKey } from './keyspace.js';
export { createProvider, PostgresLockProvider, type PostgresProviderOptions } from './provider.js';
export { withXactLock, type XactGrant, type XactLockOptions, xactLock } from './xact.js';
