import { describe, expect, it } from 'vitest';
import { createRecordBackend, IdempotencyStore, type RecordBackend } from '../../src/idempotency/index.js';

describe('createRecordBackend', () => {
  it("gives a URL's records to wrap: a store over the wrapped records runs through them", async () => {
    const records = await createRecordBackend('memory://create-records');
    const begun: string[] = [];
    // A wrapper that delegates to the records (their state is private to them: bind, not inherit).
    const wrapped: RecordBackend = new Proxy(records, {
      get(target, property) {
        if (property === 'begin') {
          return (request: Parameters<RecordBackend['begin']>[0]) => {
            begun.push(request.key);
            return target.begin(request);
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const store = new IdempotencyStore(wrapped);
    try {
      expect(await store.run('order-1', { amount: 5 }, () => 'charged')).toBe('charged');
      expect(await store.run('order-1', { amount: 5 }, () => 'again')).toBe('charged');
      expect(begun).toEqual(['order-1', 'order-1']);
    } finally {
      await store.close();
    }
  });

  it('refuses a URL no store runs on, naming the argument', async () => {
    await expect(createRecordBackend('zk://127.0.0.1:2181')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });
  it('a start answered after its lease may have run out is never run: after 3 such starts the call fails', async () => {
    const records = await createRecordBackend('memory://late-starts');
    const calls = { begin: 0, abandon: 0 };
    // Every begin answers later than the lease (a slower machine only makes it later).
    const late: RecordBackend = new Proxy(records, {
      get(target, property) {
        if (property === 'begin') {
          return async (request: Parameters<RecordBackend['begin']>[0]) => {
            calls.begin += 1;
            const begun = await target.begin(request);
            await new Promise((resolve) => setTimeout(resolve, request.leaseMs + 50));
            return begun;
          };
        }
        if (property === 'abandon') calls.abandon += 1;
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const store = new IdempotencyStore(late);
    let ran = false;
    try {
      await expect(
        store.run(
          'order-late',
          {},
          () => {
            ran = true;
          },
          { leaseMs: 200, retentionMs: 60_000 },
        ),
      ).rejects.toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
      expect(ran).toBe(false);
      expect(calls).toEqual({ begin: 3, abandon: 1 });
    } finally {
      await store.close();
    }
  });
});
