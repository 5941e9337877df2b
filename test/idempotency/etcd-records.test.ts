import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient } from '../../adapters/etcd/client.js';
import {
  createIdempotencyStore,
  IdempotencyMismatchError,
  type IdempotencyStore,
} from '../../src/idempotency/index.js';
import { eventually } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';
import { beginRun, completeRun, etcdEndpoints, rawRecords } from './backends.js';

// What only etcd does: a claim on a lease of its own, tokens from etcd's revision, keys under the
// URL's namespace. The contract every backend keeps is in store.test.ts.
const key = (label: string) => `${label}-${crypto.randomUUID()}`;
const PREFIX = 'fencekit/idem/';

let server: ServerGroup;
let url: string;
let etcd: Etcd3;
let store: IdempotencyStore;
beforeAll(async () => {
  server = await startServers('etcd');
  url = `etcd://${endpoint(server, 'ETCD_ENDPOINTS').replace(/http:\/\//g, '')}`;
  etcd = etcdClient({ endpoints: etcdEndpoints(url) });
  store = await createIdempotencyStore(url, { callTimeoutMs: 2_000 });
});
afterAll(async () => {
  await store?.close();
  etcd?.close();
  await server?.stop();
});

const claimOf = async (k: string) => (await etcd.get(`${PREFIX}claim/${k}`).exec()).kvs[0];
const recordOf = async (k: string) => (await etcd.get(`${PREFIX}record/${k}`).exec()).kvs[0];

/** Begins a run in a records object that then does nothing, as a process that crashed. */
async function crashedRun(k: string, leaseMs: number) {
  const zombie = rawRecords('etcd', url);
  const began = await beginRun(zombie, k, store.hash('p'), leaseMs, 60_000, 'zombie-attempt');
  if (began.state !== 'started') throw new Error(`the zombie did not start: ${began.state}`);
  return { zombie, token: began.token };
}

describe('idempotency records on etcd', () => {
  it('a crashed run’s claim goes with its lease; the record stays, and a repeat takes it over', async () => {
    const k = key('crashed');
    const { zombie, token } = await crashedRun(k, 1_000);
    try {
      const [claim, record] = [await claimOf(k), await recordOf(k)];
      expect(claim?.lease).not.toBe('0'); // the claim's own lease…
      expect(record?.lease).not.toBe('0'); // …and the record's retention lease, another one
      expect(record?.lease).not.toBe(claim?.lease);
      expect(BigInt(claim?.create_revision ?? 0)).toBe(token);
      await eventually(
        'the claim ended with its lease',
        async () => (await claimOf(k)) === undefined,
        15_000,
      );
      expect(await recordOf(k)).toBeDefined();
      // Kept for its retention: the key was used with this payload, another one is refused.
      const other = await store.run(k, 'other', () => 'never').catch((e: unknown) => e);
      expect(other).toBeInstanceOf(IdempotencyMismatchError);
      let retryToken = 0n;
      expect(
        await store.run(k, 'p', ({ fencingToken }) => {
          retryToken = fencingToken;
          return 'retry';
        }),
      ).toBe('retry');
      expect(retryToken).toBeGreaterThan(token);
    } finally {
      await zombie.close();
    }
  });

  it('a run whose claim ran out, with nobody taking over, still completes, as on the other stores', async () => {
    // Before: refused with its own token given as the "current" one.
    const k = key('lapsed');
    const { zombie, token } = await crashedRun(k, 1_000);
    try {
      await eventually(
        'the claim ended with its lease',
        async () => (await claimOf(k)) === undefined,
        15_000,
      );
      expect(await completeRun(zombie, k, token, { kind: 'value', body: '"late"' }, 60_000)).toEqual({
        stored: true,
      });
      expect(await store.execute(k, 'p', () => 'again')).toEqual({ value: 'late', replayed: true });
    } finally {
      await zombie.close();
    }
  });

  it('after a takeover the old run can neither renew, complete nor abandon', async () => {
    const k = key('stale');
    const { zombie, token } = await crashedRun(k, 1_000);
    try {
      await eventually(
        'the claim ended with its lease',
        async () => (await claimOf(k)) === undefined,
        15_000,
      );
      const value = await store.run(k, 'p', async ({ fencingToken }) => {
        expect(await zombie.renew(k, token, 1_000)).toBe(false);
        const late = await completeRun(zombie, k, token, { kind: 'value', body: '"zombie"' }, 60_000);
        expect(late).toEqual({ stored: false, current: fencingToken });
        await zombie.abandon(k, token); // must not end the new run's claim
        expect(BigInt((await claimOf(k))?.create_revision ?? 0)).toBe(fencingToken);
        return 'retry';
      });
      expect(value).toBe('retry');
      expect(await store.execute(k, 'p', () => 'third')).toEqual({ value: 'retry', replayed: true });
    } finally {
      await zombie.close();
    }
  });

  it('a key deleted and used again gets a strictly higher token, from a fresh store too', async () => {
    const k = key('recreated');
    const tokens: bigint[] = [];
    const fn = ({ fencingToken }: { fencingToken: bigint }) => {
      tokens.push(fencingToken);
      return tokens.length;
    };
    expect(await store.run(k, 'p', fn)).toBe(1);
    await etcd.delete().key(`${PREFIX}record/${k}`).exec();
    expect(await store.run(k, 'p', fn)).toBe(2);
    await etcd.delete().key(`${PREFIX}record/${k}`).exec();
    const fresh = await createIdempotencyStore(url);
    try {
      expect(await fresh.run(k, 'p', fn)).toBe(3);
    } finally {
      await fresh.close();
    }
    expect(tokens[1]).toBeGreaterThan(tokens[0] as bigint);
    expect(tokens[2]).toBeGreaterThan(tokens[1] as bigint);
  });

  it('keys go under the URL’s namespace, then the prefix option', async () => {
    const k = key('namespaced');
    const spaced = await createIdempotencyStore(`${url}?namespace=app%2F`, { prefix: 'idem/' });
    try {
      expect(await spaced.run(k, 'p', () => 'stored')).toBe('stored');
      const stored = await etcd.get(`app/idem/record/${k}`).json();
      expect(stored).toMatchObject({ s: 'd', b: '"stored"' });
      expect(await recordOf(k)).toBeUndefined();
    } finally {
      await spaced.close();
    }
  });
});
