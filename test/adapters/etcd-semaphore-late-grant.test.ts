import { InterceptingCall, type Interceptor } from '@grpc/grpc-js';
import type { CallContext } from 'etcd3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { namePrefix } from '../../adapters/etcd/keys.js';
import type { Permit } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

const CALL_TIMEOUT_MS = 1_000;
/** The granting Txn's answer comes this late: etcd applied it, the caller gave up long before. */
const GRANT_ANSWER_LATE_MS = 3_000;
/** The clean-up's first read of the permit key comes late too (past its deadline), as on a slow link. */
const CLEANUP_READ_LATE_MS = 1_500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Holds back answers of chosen etcd calls on one client: the request reaches etcd and is applied
 * at once, its answer (metadata, message, status) is delivered `ms` later. Built from the etcd3
 * client's per-call options, which see each call's method and request.
 */
class LateAnswers {
  /** Grant Txns (a put under `leases/`) whose answer is still to be held back. */
  grantTxns = 0;
  /** Reads of one permit key (no range_end: a clean-up's read) still to be held back. */
  permitKeyReads = 0;
  /** Answers held back and not delivered yet. */
  pending = 0;

  callOptions = (context: CallContext) => {
    const ms = this.#delayFor(context);
    return ms > 0 ? { interceptors: [this.#holdBack(ms)] } : {};
  };

  #delayFor(context: CallContext): number {
    if (!('params' in context)) return 0; // a stream (watch, keepalive)
    const method = context.method;
    const request = context.params as {
      key?: Buffer;
      range_end?: Buffer;
      success?: Array<{ request_put?: { key: Buffer } }>;
    };
    if (method === 'txn' && this.grantTxns > 0) {
      const puts = (request.success ?? []).map((op) => op.request_put?.key.toString() ?? '');
      if (puts.some((key) => key.includes('/leases/'))) {
        this.grantTxns -= 1;
        return GRANT_ANSWER_LATE_MS;
      }
    }
    if (method === 'range' && this.permitKeyReads > 0 && request.range_end === undefined) {
      if (request.key?.toString().includes('/leases/')) {
        this.permitKeyReads -= 1;
        return CLEANUP_READ_LATE_MS;
      }
    }
    return 0;
  }

  #holdBack(ms: number): Interceptor {
    return (options, nextCall) =>
      new InterceptingCall(nextCall(options), {
        start: (metadata, _listener, next) => {
          this.pending += 1;
          const later = (deliver: () => void) => setTimeout(deliver, ms);
          next(metadata, {
            onReceiveMetadata: (received, pass) => later(() => pass(received)),
            onReceiveMessage: (message, pass) => later(() => pass(message)),
            onReceiveStatus: (status, pass) =>
              later(() => {
                this.pending -= 1;
                pass(status);
              }),
          });
        },
      });
  }
}

/**
 * A permit whose granting Txn etcd applied but answered after the call's deadline: the request is
 * retried, and what the first Txn made (the permit key created, the queue key deleted) must not
 * block the name, nor be deleted under a grant that holds it.
 */
describe('etcd semaphore: a grant Txn applied but answered late', () => {
  let etcd: ServerGroup;
  let endpoints: string[];
  const providers: EtcdLockProvider[] = [];
  const open = (late?: LateAnswers) => {
    const provider = new EtcdLockProvider({
      endpoints,
      sessionTtlMs: 10_000, // the victim's session outlives every wait below
      callTimeoutMs: CALL_TIMEOUT_MS,
      ...(late ? { clientOptions: { defaultCallOptions: late.callOptions } } : {}),
    });
    providers.push(provider);
    return provider;
  };
  beforeAll(async () => {
    etcd = await startServers('etcd');
    endpoints = endpoint(etcd, 'ETCD_ENDPOINTS').split(',');
  });
  afterEach(async () => {
    await Promise.allSettled(providers.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  /** A's acquire on `name`, whose first grant Txn is applied and answered late, then retried. */
  async function lateGrant(name: string, limit: number) {
    const late = new LateAnswers();
    const a = open(late);
    const b = open();
    const semA = a.semaphore(name, { limit });
    await (await semA.acquire()).release(); // A's session exists: the next acquire goes straight on
    late.grantTxns = 1;
    late.permitKeyReads = 1;
    const permit = await semA.acquire({ waitMs: 8_000 });
    expect(late.grantTxns).toBe(0); // the late answer was the first grant Txn's
    return { late, a, b, permit };
  }

  it('later requests on the name are granted without waiting for the victim’s session to end', async () => {
    const name = uniqueKey('sem-late-grant');
    const { b, permit } = await lateGrant(name, 2);
    expect(permit.held).toBe(true);
    // B asks for the second permit: its session is not A's, and A's session lives on (10 s).
    const started = performance.now();
    const granted = await b
      .semaphore(name, { limit: 2 })
      .acquire({ waitMs: 5_000 })
      .then(
        (p) => p,
        (error: Error) => error,
      );
    console.log(
      `B after A's late grant: ${granted instanceof Error ? granted.message : 'granted'} in ${Math.round(performance.now() - started)} ms`,
    );
    expect(granted).not.toBeInstanceOf(Error);
    const waiters = (await b.semaphore(name, { limit: 2 }).inspect()).waiters;
    expect(waiters).toBe(0); // no queue key of A's left behind
    await (granted as Permit).release();
    await permit.release();
  }, 30_000);

  it('never more than limit live holders, and a held permit’s key exists while it is held', async () => {
    const name = uniqueKey('sem-late-grant');
    const { late, b, permit } = await lateGrant(name, 1);
    const semB = b.semaphore(name, { limit: 1 });
    const holders: Permit[] = [permit];
    const waiting = semB.acquire({ waitMs: 12_000 }).then((p) => {
      holders.push(p);
      return p;
    });
    waiting.catch(() => undefined); // awaited below
    const live = () => holders.filter((p) => p.held && !p.signal.aborted);
    const leases = `${namePrefix('/semaphore/', name)}leases/`; // the provider has no namespace
    /** A held permit's key, by its create revision (its fencing token), read from etcd. */
    const keyExists = async (p: Permit) => {
      const kvs = await b.client.getAll().prefix(leases).exec();
      return kvs.kvs.some((kv) => BigInt(kv.create_revision) === p.fencingToken);
    };
    // Watch A's permit until every late answer is delivered and the clean-ups had 1.5 s more.
    let maxLive = 0;
    let settledAt: number | undefined;
    const deadline = performance.now() + 15_000;
    while (performance.now() < deadline) {
      if (late.pending === 0) settledAt ??= performance.now();
      if (settledAt !== undefined && performance.now() - settledAt > 1_500) break;
      const heldBefore = permit.held;
      const exists = await keyExists(permit);
      const heldAfter = permit.held;
      maxLive = Math.max(maxLive, live().length);
      // Held throughout the read: the permit key must have been there.
      if (heldBefore && heldAfter) expect(exists, 'A holds a permit whose key is gone').toBe(true);
      expect(live().length).toBeLessThanOrEqual(1);
      await sleep(20);
    }
    expect(settledAt).toBeDefined();
    expect(permit.held).toBe(true);
    await permit.release();
    const next = await waiting; // B is granted once A releases
    expect(live()).toEqual([next]);
    expect(await keyExists(next)).toBe(true);
    console.log(`max live holders ${maxLive} (limit 1)`);
    await next.release();
  }, 40_000);
});
