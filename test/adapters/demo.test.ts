import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EveryBackend, startEveryBackend } from '../servers/index.js';

// `npm start -- --url <url>`: worker A is a real child process stopped with SIGSTOP past its lease.
const run = promisify(execFile);
const cli = resolve(import.meta.dirname, '../../dist/cli.js');
const demo = async (url: string) =>
  (await run(process.execPath, [cli, 'demo', '--url', url, '--ttl', '1000'])).stdout;

describe('the demo on every network backend', () => {
  let servers: EveryBackend;
  beforeAll(async () => {
    servers = await startEveryBackend();
  });
  afterAll(() => servers?.stop());

  it.each(['etcd', 'zookeeper', 'redis'] as const)(
    '%s: 2 charges without fencing, 1 with (the stale write rejected)',
    async (backend) => {
      const out = await demo(servers.urls[backend]);
      expect(out).toMatch(/=> 2 charges/);
      expect(out).toMatch(/DOUBLE CHARGE/);
      expect(out).toMatch(/=> 1 charge, 1 stale write rejected/);
    },
  );

  it('postgres: the stopped holder keeps its lock (no TTL), so B waits: 1 charge in both runs', async () => {
    const out = await demo(servers.urls.postgres);
    expect(out).toMatch(/gave up: the lock stayed with the stopped worker/);
    expect(out).toMatch(/=> 1 charge\n/);
    expect(out).toMatch(/Summary: 1 charge in both runs/);
  });
});
