/**
 * Idempotency keys: a store whose in-flight records are leases with fencing tokens, and HTTP middleware.
 * @module fencekit/idempotency
 */
export { jsonCodec, type ResultCodec } from './codec.js';
export { type CreateIdempotencyStoreOptions, createIdempotencyStore, createRecordBackend } from './create.js';
export { FinalError, IdempotencyInFlightError, IdempotencyMismatchError } from './errors.js';
export { idempotencyMiddleware } from './express.js';
export { type IdempotencyPluginOptions, idempotencyPlugin } from './fastify.js';
export { type Canonicalize, canonicalJson } from './hash.js';
export {
  type HttpIdempotencyOptions,
  type IdempotencyContext,
  idempotencyContext,
  type StoredResponse,
} from './http-core.js';
// For stores over other backends: implement RecordBackend and pass it to new IdempotencyStore().
export type { StoredOutcome } from './outcome.js';
export type { BeginRequest, BeginResult, CompleteRequest, CompleteResult, RecordBackend } from './records.js';
export {
  type Execution,
  IdempotencyStore,
  type IdempotencyStoreOptions,
  type RunContext,
} from './store.js';
export {
  DEFAULT_LEASE_MS,
  DEFAULT_RETENTION_MS,
  MAX_IDEMPOTENCY_KEY_BYTES,
  type RunOptions,
} from './validate.js';
