import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// The packed tarball, installed from the registry into a scratch app beside each supported major
// of ioredis, the way an app installs it: the peer range must accept it (no ERESOLVE) and a lock
// must work through it. Runs against the built package (npm test builds before vitest).
const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const program = `
import { Redis } from 'ioredis';
import { connect } from 'fencekit';
import { RedisLockProvider } from 'fencekit/redis';
import { Redlock } from 'fencekit/compat/redlock';
import { Mutex } from 'fencekit/compat/redis-semaphore';
const url = process.argv[2];
const a = await connect(url, { callTimeoutMs: 2000 });
const own = new Redis(url);
const b = new RedisLockProvider({ client: own, callTimeoutMs: 2000 });
const key = 'peer-' + process.pid;
const first = await a.acquire(key, { ttlMs: 5000, owner: 'first' });
const refused = await b.tryAcquire(key);
const info = await b.inspect(key);
// A waiter on the other provider gets the key when the holder releases (hand-over notice).
const waiting = b.acquire(key, { ttlMs: 5000, waitMs: 5000 });
await new Promise((r) => setTimeout(r, 100));
await first.release();
const second = await waiting;
const after = await a.inspect(key);
await second.release();
const free = await a.inspect(key);
// The redlock facade over an ioredis client, as redlock takes it.
const redlock = new Redlock([new Redis(url)], { retryCount: 0 });
const viaFacade = await redlock.acquire([key + ':facade'], 2000);
const facadeToken = typeof viaFacade.fencingToken;
await viaFacade.release();
await redlock.quit();
// The redis-semaphore facade's Mutex on the app's client.
const mutex = new Mutex(own, key);
await mutex.acquire();
const mutexHeld = mutex.isAcquired;
await mutex.release();
await Promise.all([a.close(), b.close()]);
own.disconnect();
console.log(JSON.stringify({
  refused: refused === null,
  owner: info?.holder?.owner ?? null,
  sameToken: info?.holder?.fencingToken === first.fencingToken,
  rises: second.fencingToken > first.fencingToken,
  handedTo: after?.holder?.fencingToken === second.fencingToken,
  free: free === null,
  facadeToken,
  mutexHeld,
}));
`;

// Needs the npm registry (or a warm cache): FENCEKIT_OFFLINE=1 skips it where neither is reachable.
describe.skipIf(process.env.FENCEKIT_OFFLINE === '1')(
  'packed tarball with each supported ioredis major',
  () => {
    const scratch = mkdtempSync(join(tmpdir(), 'fencekit-peers-'));
    let tarball: string;
    let server: ServerGroup;
    let url: string;

    beforeAll(async () => {
      if (!existsSync(join(root, 'dist', 'index.js')))
        await run(npm, ['run', 'build', '--silent'], { cwd: root });
      // The server first: afterAll stops it even if packing fails. --ignore-scripts: prepack would
      // rebuild dist (tsup cleans it first) under the other test files that load it meanwhile.
      const packing = run(npm, ['pack', '--silent', '--ignore-scripts', '--pack-destination', scratch], {
        cwd: root,
      });
      packing.catch(() => undefined);
      server = await startServers('redis');
      const packed = await packing;
      tarball = join(scratch, packed.stdout.trim().split('\n').pop() as string);
      url = endpoint(server, 'REDIS_URL');
    }, 120_000);
    afterAll(async () => {
      await server?.stop();
      rmSync(scratch, { recursive: true, force: true });
    });

    it.each(['5', '6'])(
      'installs beside ioredis@%s without a peer conflict and locks through it',
      async (major) => {
        const app = join(scratch, `app-ioredis-${major}`);
        mkdirSync(app, { recursive: true });
        writeFileSync(
          join(app, 'package.json'),
          JSON.stringify({ name: `app-${major}`, private: true, type: 'module' }),
        );
        // No --force / --legacy-peer-deps: a peer range that excludes this major fails with ERESOLVE.
        const install = await run(
          npm,
          ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, `ioredis@${major}`],
          { cwd: app },
        ).then(
          () => 'ok',
          (error: { stderr?: string }) => (error.stderr ?? '').match(/ERESOLVE[^\n]*/)?.[0] ?? String(error),
        );
        expect(install).toBe('ok');
        const { stdout: version } = await run(
          process.execPath,
          ['-e', "console.log(require('ioredis/package.json').version)"],
          { cwd: app },
        );
        expect(version.trim().split('.')[0]).toBe(major);
        writeFileSync(join(app, 'check.mjs'), program);
        const { stdout } = await run(process.execPath, [join(app, 'check.mjs'), url], {
          cwd: app,
          timeout: 30_000,
        });
        expect(JSON.parse(stdout)).toEqual({
          refused: true,
          owner: 'first',
          sameToken: true,
          rises: true,
          handedTo: true,
          free: true,
          facadeToken: 'bigint',
          mutexHeld: true,
        });
      },
      90_000,
    );
  },
);
