export { createProvider, RedisLockProvider, type RedisProviderOptions } from './provider.js';
