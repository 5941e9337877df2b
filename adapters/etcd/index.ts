export { namePrefix } from './keys.js';
export { createProvider, EtcdLockProvider, type EtcdProviderOptions } from './provider.js';
