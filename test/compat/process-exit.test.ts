import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// redlock and redis-semaphore keep nothing alive of their own: a script that acquires (releasing or
// not: redis-semaphore's refresh timer is unref'd, redlock has none) and quits its Redis client exits. So must one on the facades, which the app never closes (their
// timers are unref'd, and a provider opened over the client closes when the client ends).
// The child imports the built package (npm test builds first).
const childScript = resolve(import.meta.dirname, 'exit-child.mjs');

let redisServer: ServerGroup;
beforeAll(async () => {
  redisServer = await startServers('redis');
}, 60_000);
afterAll(async () => {
  await redisServer?.stop();
});

/** How the child ended: its output and whether it exited by itself within the bound. */
function runChild(args: string[], boundMs: number): Promise<{ output: string; exited: boolean }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [childScript, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    // Generous: a process that exits takes well under a second; one held open never exits.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      done({ output, exited: false });
    }, boundMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      done({ output, exited: code === 0 });
    });
  });
}

describe.each(['redlock', 'redis-semaphore'])('the %s facade keeps no process alive', (facade) => {
  it.each([
    { layout: 'default', ending: 'released' },
    { layout: 'fencekit', ending: 'released' },
    { layout: 'default', ending: 'held' },
    { layout: 'fencekit', ending: 'held' },
  ])(
    'layout $layout, locks $ending: quit the client, and the process exits',
    async ({ layout, ending }) => {
      const outcome = await runChild([endpoint(redisServer, 'REDIS_URL'), facade, layout, ending], 15_000);
      expect(outcome).toEqual({ output: `${ending} and quit\n`, exited: true });
    },
    30_000,
  );
});
