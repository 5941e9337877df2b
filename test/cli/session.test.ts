import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { lockKeys } from '../../adapters/redis/scripts.js';
import { connect, type LockProvider } from '../../src/index.js';
import { eventually } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startAll, startServers } from '../servers/index.js';
import {
  anyThreadAlive,
  CliProcesses,
  groupWithStubbornMember,
  logLines,
  nextHolderCommand,
  sessionOf,
  sessionWithStubbornMember,
  until,
} from './cli-process.js';

/** The real python3 (not a version manager's shim), or undefined when there is none. */
function findPython(): string | undefined {
  try {
    return execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}
const python = findPython();

/** A cgroup v1 freezer: a frozen process keeps a SIGKILL pending until thawed (it outlives SIGKILL). */
const FREEZER = '/sys/fs/cgroup/freezer';
const canFreeze = existsSync(join(FREEZER, 'cgroup.procs')) && process.getuid?.() === 0;

// The CLI follows the command's session, not only its group, and never lets the grant go while a
// process of it may run: not after a setpgid, not for a zombie whose thread runs, not when its
// own output is gone or it fails, not when SIGKILL does not end the session.
describe('the fencekit command and its command session', () => {
  let redis: ServerGroup;
  let postgres: ServerGroup;
  let redisUrl: string;
  let pgUrl: string;
  let raw: Redis;
  let observer: LockProvider;
  let dir: string;
  let n = 0;
  const cli = new CliProcesses();
  const members: number[] = [];
  const frozen: string[] = [];
  const name = (label: string) => `cli-session/${label}/${process.pid}-${++n}`;

  beforeAll(async () => {
    [redis, postgres] = await startAll([startServers('redis'), startServers('postgres')]);
    redisUrl = endpoint(redis, 'REDIS_URL');
    pgUrl = endpoint(postgres, 'PG_URL');
    raw = new Redis(redisUrl);
    observer = await connect(redisUrl);
    dir = mkdtempSync(join(tmpdir(), 'fencekit-cli-session-'));
  });
  afterEach(async () => {
    const cgroups = frozen.splice(0);
    for (const cgroup of cgroups) writeFileSync(join(cgroup, 'freezer.state'), 'THAWED');
    for (const pid of members.splice(0)) if (anyThreadAlive(pid)) process.kill(pid, 'SIGKILL');
    for (const cgroup of cgroups) {
      await until(
        'the frozen cgroup empties',
        () => readFileSync(join(cgroup, 'cgroup.procs'), 'utf8') === '',
      );
      rmdirSync(cgroup);
    }
    await cli.stop();
  });
  afterAll(async () => {
    raw?.disconnect();
    await observer?.close();
    await Promise.all([redis?.stop(), postgres?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const files = () => ({
    pidFile: join(dir, `member-${n}.pid`),
    ticks: join(dir, `ticks-${n}.txt`),
    go: join(dir, `go-${n}`),
    out: join(dir, `next-${n}.json`),
  });
  const memberStarted = async (f: { pidFile: string; ticks: string }) => {
    await until('the member ticks', () => logLines(f.ticks).length > 0);
    const pid = Number(readFileSync(f.pidFile, 'utf8'));
    members.push(pid);
    return pid;
  };
  const lockArgs = (key: string, url: string, tail: string[], extra: string[] = []) => [
    'lock',
    key,
    '--url',
    url,
    ...extra,
    '--',
    ...tail,
  ];
  const waitersReach = (key: string, count: number) =>
    eventually(
      `${count} waiting for ${key}`,
      async () => (await observer.inspect(key))?.waiters === count,
      10_000,
    );
  /** What the next holder's command saw of the member when it started. */
  const seenByNext = async (out: string) => {
    await until('the next holder ran', () => logLines(out).length > 0, 30_000);
    return JSON.parse(readFileSync(out, 'utf8')) as { memberAlive: boolean; ticks: number };
  };

  describe.skipIf(python === undefined)('a member in a process group of its own (setpgid)', () => {
    it('SIGTERM to the CLI: the member gets SIGKILL after --grace before the next holder starts', async () => {
      const key = name('setpgid-signal');
      const f = files();
      const extra = ['--ttl', '3000', '--grace', '300'];
      const first = cli.start(
        lockArgs(key, redisUrl, sessionWithStubbornMember(python ?? '', f, 'new-group', 'sleeps'), extra),
      );
      const member = await memberStarted(f);
      const next = cli.start(lockArgs(key, redisUrl, nextHolderCommand(f), extra));
      await waitersReach(key, 1);
      first.child.kill('SIGTERM');
      expect(await first.exited()).toBe(143);
      expect((await seenByNext(f.out)).memberAlive).toBe(false);
      expect(anyThreadAlive(member)).toBe(false);
      expect(await next.exited()).toBe(0);
    });

    it('the command exits 0 leaving it behind: it is stopped before the release, exit 0', async () => {
      const key = name('setpgid-exit');
      const f = files();
      const extra = ['--ttl', '3000', '--grace', '300'];
      const first = cli.start(
        lockArgs(
          key,
          redisUrl,
          sessionWithStubbornMember(python ?? '', f, 'new-group', 'exits-on-go'),
          extra,
        ),
      );
      const member = await memberStarted(f);
      const next = cli.start(lockArgs(key, redisUrl, nextHolderCommand(f), extra));
      await waitersReach(key, 1);
      writeFileSync(f.go, '');
      expect(await first.exited()).toBe(0);
      expect((await seenByNext(f.out)).memberAlive).toBe(false);
      expect(first.stderr()).toMatch(/exited \(0\) but processes of its session \d+ still run/);
      expect(anyThreadAlive(member)).toBe(false);
      expect(await next.exited()).toBe(0);
    });
  });

  describe.skipIf(python === undefined)('a member whose main thread exited while another runs', () => {
    it('is not taken for a zombie: it gets the whole --grace, then SIGKILL, and is waited for', async () => {
      const key = name('zombie-thread');
      const f = files();
      const run = cli.start(
        lockArgs(key, redisUrl, sessionWithStubbornMember(python ?? '', f, 'zombie-leader', 'sleeps'), [
          '--ttl',
          '3000',
          '--grace',
          '6000',
        ]),
      );
      const member = await memberStarted(f);
      const leader = sessionOf(member);
      await until('the member shows as a zombie', () =>
        readFileSync(`/proc/${member}/stat`, 'utf8').includes(') Z '),
      );
      run.child.kill('SIGTERM');
      await until('the leader (sleep) is gone', () => !anyThreadAlive(leader));
      // The member's thread ignores SIGTERM and runs on until the SIGKILL after --grace.
      const ticks = logLines(f.ticks).length;
      await until('the thread ticks on while the CLI waits', () => logLines(f.ticks).length >= ticks + 10);
      expect(await run.exited()).toBe(143);
      expect(anyThreadAlive(member)).toBe(false);
      expect(await raw.exists(lockKeys('fencekit:', key).lock)).toBe(0); // released once it was gone
    });
  });

  it('the CLI keeps working when its output pipes are closed (EPIPE) and stops the command before releasing', async () => {
    const key = name('epipe');
    const f = files();
    const run = cli.start(
      lockArgs(key, redisUrl, groupWithStubbornMember(f, 'sleeps'), ['--ttl', '3000', '--grace', '300']),
    );
    const member = await memberStarted(f);
    run.child.stdout?.destroy();
    run.child.stderr?.destroy();
    // The loss makes the CLI write to its stderr, whose reader is gone.
    expect(await raw.del(lockKeys('fencekit:', key).lock)).toBe(1);
    expect(await run.exited()).toBe(137); // a lost grant: SIGKILL at once
    expect(anyThreadAlive(member)).toBe(false);
  });

  it('a failure of the CLI while the command runs: the command is killed, exit 1, not released', async () => {
    const key = name('crash');
    const f = files();
    // Injected through NODE_OPTIONS: SIGUSR2 makes the CLI throw from an event handler.
    const preload = join(dir, 'throw-on-usr2.cjs');
    writeFileSync(preload, "process.on('SIGUSR2', () => { throw new Error('injected failure'); });\n");
    const run = cli.start(
      lockArgs(key, redisUrl, groupWithStubbornMember(f, 'sleeps'), ['--ttl', '20000', '--grace', '300']),
      { env: { NODE_OPTIONS: `--require ${preload}` } },
    );
    const member = await memberStarted(f);
    run.child.kill('SIGUSR2');
    expect(await run.exited()).toBe(1);
    expect(anyThreadAlive(member)).toBe(false);
    expect(run.stderr()).toMatch(/injected failure/);
    expect(await raw.exists(lockKeys('fencekit:', key).lock)).toBe(1); // left to its lease
    await raw.del(lockKeys('fencekit:', key).lock);
  });

  it('--grace past 2^31 ms is waited, not turned into 1 ms', async () => {
    const key = name('long-grace');
    const log = join(dir, `log-${n}.txt`);
    const script = `
const fs = require('node:fs');
const line = (event) => fs.appendFileSync(${JSON.stringify(log)}, event + '\\n');
line('start');
process.on('SIGTERM', () => { line('SIGTERM'); setTimeout(() => { line('cleaned up'); process.exit(5); }, 300); });
setTimeout(() => undefined, 60_000);`;
    const run = cli.start(
      lockArgs(key, redisUrl, [process.execPath, '-e', script], ['--ttl', '3000', '--grace', '3000000000']),
    );
    await until('the command runs', () => logLines(log).length === 1);
    run.child.kill('SIGTERM'); // forwarded while the grant holds: the grace applies (not after a loss)
    expect(await run.exited()).toBe(5);
    expect(logLines(log)).toEqual(['start', 'SIGTERM', 'cleaned up']);
    expect(run.stderr()).not.toMatch(/TimeoutOverflowWarning/);
  });

  // A session that outlives SIGKILL (here: frozen in a cgroup) keeps the grant: on PostgreSQL the
  // lock ends with the CLI's connection, on Redis with its lease, so the CLI neither releases nor
  // leaves until the session is empty.
  describe.skipIf(!canFreeze)('a session that outlives SIGKILL', () => {
    it.each([
      ['postgres', () => pgUrl, []],
      ['redis', () => redisUrl, ['--ttl', '2000']],
    ])('%s: the CLI holds the grant until it is gone, then exits 71', async (_backend, url, ttl) => {
      const key = name('frozen');
      const f = files();
      const extra = [...ttl, '--grace', '300'];
      const first = cli.start(lockArgs(key, url(), groupWithStubbornMember(f, 'sleeps'), extra));
      const member = await memberStarted(f);
      const cgroup = join(FREEZER, `fencekit-test-${process.pid}-${n}`);
      mkdirSync(cgroup);
      frozen.push(cgroup);
      writeFileSync(join(cgroup, 'cgroup.procs'), String(member));
      writeFileSync(join(cgroup, 'freezer.state'), 'FROZEN');
      await until(
        'the member is frozen',
        () => readFileSync(join(cgroup, 'freezer.state'), 'utf8').trim() === 'FROZEN',
      );
      const next = cli.start(lockArgs(key, url(), nextHolderCommand(f), ttl));
      first.child.kill('SIGTERM');
      await until('the CLI gives up on SIGKILL', () => /after SIGKILL/.test(first.stderr()), 30_000);
      // Time for a next holder to come in if the grant had gone (a lease of 2 s, a closed connection).
      await until('the next holder ran', () => logLines(f.out).length > 0, 5_000).catch(() => undefined);
      writeFileSync(join(cgroup, 'freezer.state'), 'THAWED');
      expect(await first.exited()).toBe(71);
      expect((await seenByNext(f.out)).memberAlive).toBe(false);
      expect(first.stderr()).toMatch(/holding the grant until they are gone/);
      expect(await next.exited()).toBe(0);
    });
  });
});
