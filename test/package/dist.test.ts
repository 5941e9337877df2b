import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

// Runs against the built package (npm test builds before vitest), the way users load it.
const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');

const esmProgram = `
import { connect, LockTimeoutError } from 'fencekit';
import { describeConformance } from 'fencekit/testing';
const p = await connect('memory://');
const lock = await p.acquire('k', { ttlMs: 500 });
const err = await p.acquire('k', { waitMs: 0 }).catch((e) => e);
console.log(JSON.stringify({ token: String(lock.fencingToken), timeout: err instanceof LockTimeoutError, code: err.code, suite: typeof describeConformance }));
await p.close();
`;
const cjsProgram = `
const { connect, LockTimeoutError } = require('fencekit');
const { describeConformance } = require('fencekit/testing');
(async () => {
  const p = await connect('memory://');
  const lock = await p.acquire('k', { ttlMs: 500 });
  const err = await p.acquire('k', { waitMs: 0 }).catch((e) => e);
  console.log(JSON.stringify({ token: String(lock.fencingToken), timeout: err instanceof LockTimeoutError, code: err.code, suite: typeof describeConformance }));
  await p.close();
})();
`;

describe('built package', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'fencekit-dist-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it.each([
    ['ESM', 'check.mjs', esmProgram],
    ['CJS', 'check.cjs', cjsProgram],
  ])('%s entry point works through the exports map', async (_kind, file, program) => {
    // Inside the repository, so `fencekit` resolves to this package by self-reference.
    const path = join(root, 'dist', `.${file}`);
    writeFileSync(path, program);
    try {
      const { stdout } = await run(process.execPath, [path]);
      expect(JSON.parse(stdout)).toEqual({
        token: '1',
        timeout: true,
        code: 'LOCK_TIMEOUT',
        suite: 'function',
      });
    } finally {
      rmSync(path);
    }
  });

  it('names the package to install when a backend client is missing', async () => {
    // A copy of the package with its runtime dependencies but none of the optional backend clients.
    const app = join(scratch, 'app');
    const pkg = join(app, 'node_modules', 'fencekit');
    mkdirSync(pkg, { recursive: true });
    cpSync(join(root, 'dist'), join(pkg, 'dist'), { recursive: true });
    cpSync(join(root, 'package.json'), join(pkg, 'package.json'));
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: object };
    for (const dep of Object.keys(manifest.dependencies)) {
      const target = join(app, 'node_modules', dep);
      mkdirSync(dirname(target), { recursive: true }); // a scoped name (@opentelemetry/api) has a folder
      symlinkSync(join(root, 'node_modules', dep), target);
    }
    const program = join(app, 'check.mjs');
    writeFileSync(
      program,
      `import { connect } from 'fencekit';
       for (const url of ['etcd://127.0.0.1:1', 'redis://127.0.0.1:1', 'postgres://u@127.0.0.1:1/db']) {
         const e = await connect(url).catch((e) => e);
         console.log(e.code + ' ' + e.message);
       }
       // ZooKeeper needs no package: the provider opens, and an unreachable server is reported as such.
       const zk = await connect('zk://127.0.0.1:1', { callTimeoutMs: 500 });
       const e = await zk.acquire('k', { waitMs: 1000 }).catch((e) => e);
       console.log(zk.backend + ' ' + e.code);
       await zk.close();
       const { createIdempotencyStore } = await import('fencekit/idempotency');
       for (const url of ['redis://127.0.0.1:1', 'postgres://u@127.0.0.1:1/db']) {
         const e = await createIdempotencyStore(url).catch((e) => e);
         console.log(e.code + ' ' + e.message);
       }`,
    );
    const { stdout } = await run(process.execPath, [program], { cwd: app });
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(6);
    for (const [index, name] of [
      [0, 'etcd3'],
      [1, 'ioredis'],
      [2, 'pg'],
      [4, 'ioredis'],
      [5, 'pg'],
    ] as const) {
      expect(lines[index]).toMatch(new RegExp(`^BACKEND_UNAVAILABLE .*npm install ${name}$`));
    }
    expect(lines[3]).toBe('zookeeper BACKEND_UNAVAILABLE');
  });

  it('the fencekit binary runs the demo', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'dist/cli.js'), 'demo', '--ttl', '200']);
    expect(stdout).toMatch(/=> 2 charges/);
    expect(stdout).toMatch(/=> 1 charge, 1 stale write rejected/);
  });

  it('the payment-worker example runs', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'examples/payment-worker.mjs')]);
    expect(stdout).toMatch(/charged order 42: \{ amountCents: 4200 \} token 1n/);
  });

  it('the idempotency entry point works in ESM and CJS, and the payment-api example charges once', async () => {
    const check = `const k = 'k'; let runs = 0; const s = await m.createIdempotencyStore('memory://');
      const a = await s.run(k, 1, () => ++runs); const b = await s.run(k, 1, () => ++runs);
      const e = await s.run(k, 2, () => ++runs).catch((e) => e);
      console.log(JSON.stringify({ a, b, runs, code: e.code, mismatch: e instanceof m.IdempotencyMismatchError }));`;
    const expected = { a: 1, b: 1, runs: 1, code: 'IDEMPOTENCY_MISMATCH', mismatch: true };
    for (const [file, program] of [
      ['.idem.mjs', `import * as m from 'fencekit/idempotency'; ${check}`],
      ['.idem.cjs', `const m = require('fencekit/idempotency'); (async () => { ${check} })();`],
    ] as const) {
      const path = join(root, 'dist', file);
      writeFileSync(path, program);
      try {
        const { stdout } = await run(process.execPath, [path]);
        expect(JSON.parse(stdout), file).toEqual(expected);
      } finally {
        rmSync(path);
      }
    }
    const { stdout } = await run(process.execPath, [join(root, 'examples/payment-api.mjs')]);
    expect(stdout).toMatch(/attempt 1: timed out/);
    expect(stdout).toMatch(/card charged 1 time\(s\)/);
  });

  it('the controller and daily-report examples run on the memory provider', async () => {
    const controller = await run(process.execPath, [join(root, 'examples/controller-as-leader.mjs')], {
      env: { ...process.env, RUN_FOR_MS: '800' },
    });
    expect(controller.stdout).toMatch(/elected: term \d+/);
    expect(controller.stdout).toMatch(/reconcile pass/);
    const report = await run(process.execPath, [join(root, 'examples/daily-report.mjs')], {
      env: { ...process.env, REPORT_EVERY_MS: '200', RUN_FOR_MS: '1100' },
    });
    const ticks = report.stdout.match(/sends the report for (\S+)/g) ?? [];
    expect(ticks.length).toBeGreaterThanOrEqual(3);
    expect(new Set(ticks).size).toBe(ticks.length); // each tick once, whichever replica ran it
  });

  it('the fencekit binary explains bad input', async () => {
    const error = await run(process.execPath, [
      join(root, 'dist/cli.js'),
      'inspect',
      'a/../b',
      '--url',
      'memory://',
    ]).catch((e: { code: number; stderr: string }) => e);
    expect(error).toMatchObject({ code: 64 }); // EX_USAGE, as every invalid argument (docs/operations.md, "Command line")
    expect((error as { stderr: string }).stderr).toMatch(
      /invalid key: "a\/\.\.\/b" has a "\.\." path segment/,
    );
  });
});
