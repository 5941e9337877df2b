// Uncontended acquire + release on the memory provider, against a bare in-process mutex (the floor
// any lock with leases, tokens and a signal is built on) and against the fenced write alone.
import { FencedStore, MemoryLockProvider } from 'fencekit';
import { MemoryLockServer } from 'fencekit/testing';
import { measure, printTable } from './table.mjs';

class PromiseMutex {
  #tail = Promise.resolve();
  lock() {
    let unlock;
    const next = new Promise((resolve) => {
      unlock = resolve;
    });
    const ready = this.#tail.then(() => unlock);
    this.#tail = next;
    return ready;
  }
}

export async function benchMemory() {
  const mutex = new PromiseMutex();
  const provider = new MemoryLockProvider({ server: new MemoryLockServer() });
  const store = new FencedStore();
  let token = 0n;
  const rows = [
    { name: 'bare promise mutex lock+unlock', ...(await measure(async () => (await mutex.lock())())) },
    {
      name: 'fencekit memory acquire+release',
      ...(await measure(async () => {
        const lock = await provider.acquire('bench', { ttlMs: 10_000 });
        await lock.release();
      })),
    },
    {
      name: 'fencekit memory withLock + fenced write',
      ...(await measure(() =>
        provider.withLock('bench', async (lock) => store.write('row', ++token, lock.fencingToken)),
      )),
    },
  ];
  await provider.close();
  printTable('memory provider, uncontended (1 client)', rows);
}
