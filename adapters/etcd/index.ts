import type { ConnectionSpec, ConnectOptions } from '../../src/connect.js';
import { NotImplementedError } from '../../src/errors.js';
import type { LockProvider } from '../../src/types.js';

/** Placeholder until the etcd adapter lands: fails clearly instead of pretending to lock. */
export async function createProvider(_spec: ConnectionSpec, _options: ConnectOptions): Promise<LockProvider> {
  throw new NotImplementedError('the etcd adapter (fencekit/etcd)');
}
