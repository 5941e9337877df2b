import type { ReadOptions, ReadWriteLock } from 'fencekit';

/**
 * Control runs: a read-write lock that breaks one promise on purpose, to prove the checker can go
 * red. 'write-shares': every write is taken as a read of the real lock, so a writer shares the name
 * with readers and other writers (rule overlap); a downgrade of such a write takes one more read,
 * with a token of its own (rule tokens sees that too). The other control, 'token-reuse', changes
 * what the worker records instead (see read-write.ts).
 */
export function writeShares(real: ReadWriteLock): ReadWriteLock {
  const read = (opts?: ReadOptions) => {
    const { downgradeFrom: _, ...rest } = opts ?? {};
    return rest;
  };
  return {
    name: real.name,
    acquireRead: (opts) => real.acquireRead(read(opts)),
    tryAcquireRead: (opts) => real.tryAcquireRead(read(opts)),
    withRead: (fn, opts) => real.withRead(fn, read(opts)),
    acquireWrite: (opts) => real.acquireRead(opts),
    tryAcquireWrite: (opts) => real.tryAcquireRead(opts),
    withWrite: (fn, opts) => real.withRead(fn, opts),
    inspect: () => real.inspect(),
  };
}
