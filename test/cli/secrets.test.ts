import { afterAll, describe, expect, it } from 'vitest';
import { leaked, SECRET_URLS } from '../unit/secret-urls.js';
import { CliProcesses } from './cli-process.js';

/** At most this many CLI processes at once: the etcd and ZooKeeper rows wait out the default call timeout. */
const PARALLEL = 6;

describe('the fencekit command prints no password, whatever the URL looks like', () => {
  const cli = new CliProcesses();
  afterAll(() => cli.stop());

  it('lock, inspect, ls, force-release; --url, --url= and FENCEKIT_URL: stdout and stderr of every row', async () => {
    // One run per row (the etcd and ZooKeeper rows take seconds each), the commands and the three
    // ways to pass the URL taken in turn.
    const forms = [
      (url: string) => ({ args: ['lock', 'secrets/k', '--url', url, '--wait', '0', '--', 'true'], env: {} }),
      (url: string) => ({ args: ['inspect', 'secrets/k'], env: { FENCEKIT_URL: url } }),
      (url: string) => ({ args: ['ls', `--url=${url}`], env: {} }),
      (url: string) => ({ args: ['force-release', 'secrets/k', '--reason', 'test', '--url', url], env: {} }),
    ];
    const runs = SECRET_URLS.map((row, i) => ({ row, ...forms[i % forms.length]?.(row.url) }));
    const leaks: string[] = [];
    const codes = new Set<number>();
    // PARALLEL lanes, each taking the next row as soon as its last one ends: a slow row holds up
    // its own lane only, not a whole batch.
    const pending = runs.values();
    const lane = async () => {
      for (const { row, args, env } of pending) {
        const out = await cli.run(args ?? [], { env: { FENCEKIT_URL: '', ...env } });
        const found = leaked(`${out.stdout}\n${out.stderr}`, row.secret);
        if (found.length > 0) leaks.push(`${row.name} (${args?.[0]}): ${found.join(', ')}`);
        // Memory rows succeed; every other row is refused (64) or finds no server (69), and says so.
        if (row.name.startsWith('memory with')) continue;
        codes.add(out.code);
        expect(out.stderr, `${row.name} (${args?.[0]})`).toMatch(/^fencekit: .*\[[A-Z_]+\]/);
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, lane));
    console.log(`fencekit CLI: ${leaks.length} of ${SECRET_URLS.length} rows leak`);
    expect(leaks).toEqual([]);
    expect([...codes].sort()).toEqual([64, 69]);
  }, 180_000);
});
