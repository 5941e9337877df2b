import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

const LIMIT = 5;
const CONTENDERS = 20;
const ACQUISITIONS_EACH = 2;
/** A holder that never sees the semaphore full lets go after this long (only a lost slot waits it out). */
const FULL_WAIT_MS = 3_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Every slot is usable under contention. Grants go one at a time through the queue (wake, reads,
 * grant Txn), so how many permits are live at once with short holds is a matter of speed; here each
 * holder keeps its permit until the semaphore is full (or FULL_WAIT_MS), so the count reaches the
 * limit however slow etcd answers, unless a slot can never be granted.
 */
describe('etcd semaphore: every slot is used under contention', () => {
  let etcd: ServerGroup;
  beforeAll(async () => {
    etcd = await startServers('etcd');
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  it(`${CONTENDERS} contenders in 4 processes fill all ${LIMIT} permits, never more`, async () => {
    const endpoints = endpoint(etcd, 'ETCD_ENDPOINTS').split(',');
    const providers = Array.from({ length: 4 }, () => new EtcdLockProvider({ endpoints }));
    const name = uniqueKey('sem-slots');
    let live = 0;
    let maxLive = 0;
    let fills = 0;
    let fullWaitsRunOut = 0;
    let onFull: Array<() => void> = [];
    const untilFull = async () => {
      if (live === LIMIT) return;
      let timer: NodeJS.Timeout | undefined;
      const full = new Promise<void>((resolve) => onFull.push(resolve));
      const ranOut = new Promise<'ran out'>((resolve) => {
        timer = setTimeout(() => resolve('ran out'), FULL_WAIT_MS);
      });
      if ((await Promise.race([full, ranOut])) === 'ran out') fullWaitsRunOut += 1;
      clearTimeout(timer);
    };
    try {
      await Promise.all(
        Array.from({ length: CONTENDERS }, async (_, i) => {
          const sem = (providers[i % providers.length] as EtcdLockProvider).semaphore(name, { limit: LIMIT });
          for (let n = 0; n < ACQUISITIONS_EACH; n++) {
            const permit = await sem.acquire({ waitMs: 60_000 });
            expect(permit.held && !permit.signal.aborted).toBe(true);
            live += 1;
            maxLive = Math.max(maxLive, live);
            expect(live).toBeLessThanOrEqual(LIMIT);
            if (live === LIMIT) {
              fills += 1;
              for (const wake of onFull.splice(0)) wake();
            }
            await untilFull();
            await sleep(2 + Math.random() * 8);
            live -= 1;
            await permit.release();
          }
        }),
      );
    } finally {
      await Promise.allSettled(providers.map((p) => p.close()));
      onFull = [];
    }
    console.log(
      `max live ${maxLive} of ${LIMIT}; full ${fills} times; full waits run out: ${fullWaitsRunOut}`,
    );
    expect(maxLive).toBe(LIMIT);
    expect(fills).toBeGreaterThanOrEqual(1);
  }, 90_000);
});
