import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// `npm start -- --url <url>`: worker A is a real child process stopped with SIGSTOP past its lease.
const run = promisify(execFile);
const cli = resolve(import.meta.dirname, '../../dist/cli.js');
const demo = async (url: string) =>
  (await run(process.execPath, [cli, 'demo', '--url', url, '--ttl', '1000'])).stdout;

describe('the demo on every network backend', () => {
  const servers: Partial<Record<'etcd' | 'zookeeper' | 'redis' | 'postgres', ServerGroup>> = {};
  beforeAll(async () => {
    const [etcd, zookeeper, redis, postgres] = await Promise.all([
      startServers('etcd'),
      startServers('zookeeper'),
      startServers('redis'),
      startServers('postgres'),
    ]);
    Object.assign(servers, { etcd, zookeeper, redis, postgres });
  });
  afterAll(() => Promise.all(Object.values(servers).map((s) => s?.stop())));

  it.each([
    [
      'etcd',
      () => `etcd://${endpoint(servers.etcd as ServerGroup, 'ETCD_ENDPOINTS').replace(/http:\/\//g, '')}`,
    ],
    ['zookeeper', () => `zk://${endpoint(servers.zookeeper as ServerGroup, 'ZK_CONNECT')}`],
    ['redis', () => endpoint(servers.redis as ServerGroup, 'REDIS_URL')],
  ])('%s: 2 charges without fencing, 1 with (the stale write rejected)', async (_name, url) => {
    const out = await demo(url());
    expect(out).toMatch(/=> 2 charges/);
    expect(out).toMatch(/DOUBLE CHARGE/);
    expect(out).toMatch(/=> 1 charge, 1 stale write rejected/);
  });

  it('postgres: the stopped holder keeps its lock (no TTL), so B waits: 1 charge in both runs', async () => {
    const out = await demo(endpoint(servers.postgres as ServerGroup, 'PG_URL'));
    expect(out).toMatch(/gave up: the lock stayed with the stopped worker/);
    expect(out).toMatch(/=> 1 charge\n/);
    expect(out).toMatch(/Summary: 1 charge in both runs/);
  });
});
