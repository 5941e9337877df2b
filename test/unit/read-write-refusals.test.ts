import { describe, expect, it } from 'vitest';
import { connect, MemoryLockProvider } from '../../src/index.js';

// Read-write locks are on every built-in provider; where the backend has none yet (ZooKeeper) or
// never will (Redlock), readWriteLock() says so at once, before any backend call.
describe('readWriteLock() on backends without read-write locks', () => {
  it.each([
    ['zookeeper', 'zk://127.0.0.1:1'],
    ['redlock', 'redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3'],
  ])('%s: NotImplementedError', async (backend, url) => {
    const provider = await connect(url, { callTimeoutMs: 200 });
    try {
      expect(provider.backend).toBe(backend);
      expect(typeof provider.readWriteLock).toBe('function');
      expect(() => provider.readWriteLock?.('config/routes')).toThrow(
        expect.objectContaining({ code: 'NOT_IMPLEMENTED' }),
      );
    } finally {
      await provider.close();
    }
  });

  it('redis: readWriteLock() is there without a backend call (Redis has them; Redlock refuses above)', async () => {
    const provider = await connect('redis://127.0.0.1:1', { callTimeoutMs: 200 });
    try {
      const rw = provider.readWriteLock?.('config/routes');
      expect(rw?.name).toBe('config/routes');
      expect(() => provider.readWriteLock?.('a//b')).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
      // Nothing listens on port 1: the first call is an outage, not NOT_IMPLEMENTED.
      await expect(rw?.tryAcquireRead()).rejects.toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
    } finally {
      await provider.close();
    }
  });

  it('memory: a bad name is refused as a lock key is, and a closed provider refuses', async () => {
    const provider = new MemoryLockProvider();
    expect(() => provider.readWriteLock('a//b')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    await provider.close();
    expect(() => provider.readWriteLock('a')).toThrow(expect.objectContaining({ code: 'PROVIDER_CLOSED' }));
  });
});
