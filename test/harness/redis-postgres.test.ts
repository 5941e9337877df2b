import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, type ServerGroup, startAll, startServers } from '../servers/index.js';

describe('Redis (real servers)', () => {
  let single: ServerGroup;
  let three: ServerGroup;
  beforeAll(async () => {
    [single, three] = await startAll([
      startServers('redis'),
      startServers('redis', { size: 3, faults: true }),
    ]);
  });
  afterAll(() => Promise.all([single?.stop(), three?.stop()]));

  it('answers PING', async () => {
    const client = new Redis(endpoint(single, 'REDIS_URL'), { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    expect(await client.ping()).toBe('PONG');
    client.disconnect();
  });

  it('starts 3 independent instances for Redlock', async () => {
    const hosts = endpoint(three, 'REDIS_HOSTS').split(',');
    expect(new Set(hosts).size).toBe(3);
    for (const host of hosts) {
      const [h, p] = host.split(':');
      const client = new Redis({ host: h, port: Number(p), lazyConnect: true, maxRetriesPerRequest: 1 });
      await client.connect();
      await client.set('who', host);
      expect(await client.get('who')).toBe(host);
      client.disconnect();
    }
  });
});

describe('PostgreSQL (real throwaway cluster)', () => {
  let postgres: ServerGroup;
  beforeAll(async () => {
    postgres = await startServers('postgres');
  });
  afterAll(() => postgres?.stop());

  it('answers SELECT 1', async () => {
    const client = new pg.Client({
      connectionString: endpoint(postgres, 'PG_URL'),
      connectionTimeoutMillis: 5_000,
    });
    await client.connect();
    try {
      const { rows } = await client.query('SELECT 1 AS one');
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });
});
