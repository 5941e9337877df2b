import { describe, expect, it } from 'vitest';
import { connect, MemoryLockProvider } from '../../src/index.js';

// Read-write locks are on every built-in provider; Redlock will never have them, and
// readWriteLock() says so at once, before any backend call.
describe('readWriteLock() on backends without read-write locks', () => {
  it('redlock: NotImplementedError', async () => {
    const provider = await connect('redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3', { callTimeoutMs: 200 });
    try {
      expect(provider.backend).toBe('redlock');
      expect(typeof provider.readWriteLock).toBe('function');
      expect(() => provider.readWriteLock?.('config/routes')).toThrow(
        expect.objectContaining({ code: 'NOT_IMPLEMENTED' }),
      );
    } finally {
      await provider.close();
    }
  });

  it('zookeeper: a read-write lock is made without a backend call; a bad name is refused', async () => {
    const provider = await connect('zk://127.0.0.1:1', { callTimeoutMs: 200 });
    try {
      expect(provider.readWriteLock?.('config/routes').name).toBe('config/routes');
      expect(() => provider.readWriteLock?.('a//b')).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    } finally {
      await provider.close();
    }
  });

  it('redis: a read-write lock is made without a backend call; a bad name is refused', async () => {
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
