import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { lockKeys } from '../../adapters/redis/scripts.js';
import { connect, type LockProvider } from '../../src/index.js';
import { eventually } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startAll, startServers } from '../servers/index.js';
import {
  alive,
  CliProcesses,
  closedPort,
  groupWithStubbornMember,
  loggingCommand,
  logLines,
  nextHolderCommand,
  until,
} from './cli-process.js';

// Every command as a user runs it: `node dist/cli.js …` child processes against real servers.
describe('the fencekit command', () => {
  let redis: ServerGroup;
  let etcd: ServerGroup;
  let redisUrl: string;
  let etcdUrl: string;
  let raw: Redis;
  let observer: LockProvider;
  let dir: string;
  let n = 0;
  const cli = new CliProcesses();
  const name = (label: string) => `cli-test/${label}/${process.pid}-${++n}`;
  const log = () => join(dir, `log-${n}.txt`);
  /** Field 5 of /proc/<pid>/stat: the process group (-1 once the process is gone). */
  const groupOf = (pid: number) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    } catch {
      return -1;
    }
  };

  beforeAll(async () => {
    [redis, etcd] = await startAll([startServers('redis'), startServers('etcd')]);
    redisUrl = endpoint(redis, 'REDIS_URL');
    etcdUrl = `etcd://${endpoint(etcd, 'ETCD_ENDPOINTS').replace(/http:\/\//g, '')}?sessionTtlMs=2000`;
    raw = new Redis(redisUrl);
    observer = await connect(redisUrl);
    dir = mkdtempSync(join(tmpdir(), 'fencekit-cli-'));
  });
  afterEach(() => cli.stop());
  afterAll(async () => {
    raw?.disconnect();
    await observer?.close();
    await Promise.all([redis?.stop(), etcd?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Polls the backend (in this process) until `count` requests queue for key. */
  const waitersReach = (key: string, count: number) =>
    eventually(
      `${count} waiting for ${key}`,
      async () => (await observer.inspect(key))?.waiters === count,
      10_000,
    );

  describe('exit codes', () => {
    it("the command's own code, and 128 + n when signal n killed it", async () => {
      const own = await cli.run(['lock', name('own'), '--url', redisUrl, '--', 'sh', '-c', 'exit 7']);
      expect(own.code).toBe(7);
      const killed = await cli.run([
        'lock',
        name('sig'),
        '--url',
        redisUrl,
        '--',
        'sh',
        '-c',
        'kill -USR1 $$',
      ]);
      expect(killed.code).toBe(128 + 10);
    });

    it('64 for an invalid argument', async () => {
      const noUrl = await cli.run(['lock', name('u'), '--', 'true'], { env: { FENCEKIT_URL: '' } });
      expect(noUrl.code).toBe(64);
      expect(noUrl.stderr).toMatch(/--url/);
      expect(
        (await cli.run(['lock', name('w'), '--url', redisUrl, '--wait', 'soon', '--', 'true'])).code,
      ).toBe(64);
      expect((await cli.run(['lock', '--url', redisUrl])).code).toBe(64);
      expect((await cli.run(['lock', name('s'), '--url', 'nope://x', '--', 'true'])).code).toBe(64);
      const noReason = await cli.run(['force-release', name('r'), '--url', redisUrl]);
      expect(noReason.code).toBe(64);
      expect(noReason.stderr).toMatch(/--reason/);
      const emptyReason = await cli.run(['force-release', name('r'), '--url', redisUrl, '--reason', ' ']);
      expect(emptyReason.code).toBe(64);
    });

    it('69 when the backend does not answer; no password of the URL is ever printed', async () => {
      const url = `redis://ops:s3cr%3Dt@127.0.0.1:${await closedPort()}`;
      const down = await cli.run(['lock', name('down'), '--url', url, '--wait', '500', '--', 'true']);
      expect(down.code).toBe(69);
      expect(down.stderr).toMatch(/BACKEND_UNAVAILABLE/);
      const viaEnv = await cli.run(['inspect', name('down')], { env: { FENCEKIT_URL: url } });
      expect(viaEnv.code).toBe(69);
      const bad = await cli.run(['lock', name('bad'), '--url', `${url}/notanumber`, '--', 'true']);
      expect(bad.code).toBe(64);
      for (const out of [down, viaEnv, bad]) {
        expect(out.stderr + out.stdout).not.toMatch(/s3cr/);
        expect(out.stderr).toMatch(/\S/);
      }
    });

    it('75 when the lock is not granted within --wait', async () => {
      const key = name('busy');
      const holder = cli.start([
        'lock',
        key,
        '--url',
        redisUrl,
        '--',
        ...loggingCommand(log(), 'A', 20_000, 'none'),
      ]);
      const file = log();
      await until('the holder runs its command', () => logLines(file).length > 0);
      const late = await cli.run(['lock', key, '--url', redisUrl, '--wait', '300', '--', 'true']);
      expect(late.code).toBe(75);
      expect(holder.child.exitCode).toBeNull();
    });
  });

  it.each([
    ['redis', () => redisUrl],
    ['etcd', () => etcdUrl],
  ])(
    '%s: two lock commands exclude each other; the second runs after the first, with a higher token',
    async (_b, url) => {
      const key = name('exclusion');
      const file = log();
      const a = cli.start(['lock', key, '--url', url(), '--', ...loggingCommand(file, 'A', 1000, 'none')]);
      await until('A runs', () => logLines(file).length === 1);
      const b = cli.start(['lock', key, '--url', url(), '--', ...loggingCommand(file, 'B', 300, 'none')]);
      expect(await a.exited()).toBe(0);
      expect(await b.exited()).toBe(0);
      const events = logLines(file).map((l) => l.split(' ').slice(0, 2).join(' '));
      expect(events).toEqual(['start A', 'end A', 'start B', 'end B']);
      const token = (tag: string) =>
        BigInt(
          logLines(file)
            .find((l) => l.startsWith(`start ${tag}`))
            ?.split(' ')[2] ?? '',
        );
      expect(token('B')).toBeGreaterThan(token('A'));
    },
  );

  it('etcd: lock --read commands share; lock --write runs after them, with a higher token', async () => {
    const key = name('read-write');
    const file = log();
    const url = etcdUrl;
    const a = cli.start([
      'lock',
      '--read',
      key,
      '--url',
      url,
      '--',
      ...loggingCommand(file, 'A', 4000, 'none'),
    ]);
    await until('A runs', () => logLines(file).length === 1);
    const b = cli.start([
      'lock',
      '--read',
      key,
      '--url',
      url,
      '--',
      ...loggingCommand(file, 'B', 300, 'none'),
    ]);
    await until('B runs beside A', () => logLines(file).some((l) => l.startsWith('start B')));
    const w = cli.start([
      'lock',
      '--write',
      key,
      '--url',
      url,
      '--',
      ...loggingCommand(file, 'W', 100, 'none'),
    ]);
    expect(await a.exited()).toBe(0);
    expect(await b.exited()).toBe(0);
    expect(await w.exited()).toBe(0);
    const events = logLines(file).map((l) => l.split(' ').slice(0, 2).join(' '));
    expect(events.slice(0, 2)).toEqual(['start A', 'start B']);
    expect(events.slice(-2)).toEqual(['start W', 'end W']);
    const token = (tag: string) =>
      BigInt(
        logLines(file)
          .find((l) => l.startsWith(`start ${tag}`))
          ?.split(' ')[2] ?? '',
      );
    expect(token('W')).toBeGreaterThan(token('B'));
    const both = await cli.run(['lock', '--read', '--write', key, '--url', url, '--', 'true']);
    expect(both.code).toBe(64);
  });

  it('etcd: inspect --read-write shows the readers, then the writer, with their tokens', async () => {
    const key = name('rw-inspect');
    const file = log();
    const holdAndShow = async (mode: 'read' | 'write', tag: string) => {
      const holder = cli.start([
        'lock',
        `--${mode}`,
        key,
        '--url',
        etcdUrl,
        '--',
        ...loggingCommand(file, tag, 60_000, 'none'),
      ]);
      await until(`${tag} runs`, () => logLines(file).some((l) => l.startsWith(`start ${tag}`)));
      const shown = await cli.run(['inspect', '--read-write', key, '--url', etcdUrl, '--json']);
      expect(shown.code, shown.stderr).toBe(0);
      const token = logLines(file)
        .find((l) => l.startsWith(`start ${tag}`))
        ?.split(' ')[2];
      expect(JSON.parse(shown.stdout)).toMatchObject([{ name: key, mode, token, waiters: 0 }]);
      holder.child.kill('SIGTERM');
      await holder.exited();
    };
    await holdAndShow('read', 'R');
    await holdAndShow('write', 'W');
    const table = await cli.run(['inspect', '--read-write', key, '--url', etcdUrl]);
    expect(table.stdout).toMatch(/^NAME\s+MODE\s+HOLDER/);
  });

  describe('a lost lock stops the command', () => {
    it('the key deleted on Redis: the command gets SIGKILL (exit 137)', async () => {
      const key = name('lost');
      const file = log();
      const run = cli.start([
        'lock',
        key,
        '--url',
        redisUrl,
        '--ttl',
        '1500',
        '--',
        ...loggingCommand(file, 'A', 20_000, 'none'),
      ]);
      await until('the command runs', () => logLines(file).length === 1);
      expect(await raw.del(lockKeys('fencekit:', key).lock)).toBe(1);
      expect(await run.exited()).toBe(137);
      expect(run.stderr()).toMatch(/no longer held.*SIGKILL/);
    });

    it("the command's own children are stopped too: nothing of it runs after the release", async () => {
      const key = name('lost-group');
      const file = log();
      const child = `${file}.child`;
      // A shell whose child outlives a SIGTERM to the shell alone (as any script's `sleep` would);
      // the child writes its pid first, and `late` if it lives through its sleep.
      const late = `echo $$ > ${JSON.stringify(child)}; sleep 3; echo late >> ${JSON.stringify(file)}`;
      const script = `echo start >> ${JSON.stringify(file)}; sh -c '${late}'; true`;
      const run = cli.start(['lock', key, '--url', redisUrl, '--ttl', '1500', '--', 'sh', '-c', script]);
      await until('the command and its child run', () => logLines(child).length === 1);
      expect(await raw.del(lockKeys('fencekit:', key).lock)).toBe(1);
      expect(await run.exited()).toBe(137);
      // Once the child is gone nothing can write `late` any more: no need to sleep past its sleep.
      const childPid = Number(logLines(child)[0]);
      await until('the child is gone', () => !alive(childPid), 10_000);
      expect(logLines(file)).toEqual(['start']);
    });

    it('no --grace after a loss: a command that would ignore SIGTERM gets SIGKILL at once (exit 137)', async () => {
      const key = name('grace');
      const file = log();
      const run = cli.start([
        'lock',
        key,
        '--url',
        redisUrl,
        '--ttl',
        '1500',
        '--grace',
        '60000',
        '--',
        ...loggingCommand(file, 'A', 20_000, 'log-and-stay'),
      ]);
      await until('the command runs', () => logLines(file).length === 1);
      await raw.del(lockKeys('fencekit:', key).lock);
      expect(await run.exited()).toBe(137); // well within the 60 s grace (the test's own timeout)
      expect(logLines(file).map((l) => l.split(' ')[0])).toEqual(['start']);
    });

    it('a process that moves to a new group of the session after the loss gets SIGKILL too, not after --grace', async () => {
      const key = name('new-groups');
      const file = log();
      const pids = `${file}.pids`;
      // A spawner in a group of its own keeps starting processes that each move to a new group of
      // the session (setpgrp): some are born after the CLI's first look at the session. The old
      // CLI signalled only the groups of that look and left later ones to the 10-minute grace.
      const newGroup = `perl -e 'setpgrp(0,0); exec @ARGV'`;
      const spawner = join(dir, `spawner-${n}.sh`);
      writeFileSync(
        spawner,
        `i=0; while [ $i -lt 3000 ]; do ${newGroup} sleep 1000 & echo $! >> ${JSON.stringify(pids)}; i=$((i+1)); sleep 0.005; done\n`,
      );
      const leader = `echo start >> ${JSON.stringify(file)}; ${newGroup} sh ${JSON.stringify(spawner)} & echo $! >> ${JSON.stringify(pids)}; wait`;
      // Whatever the outcome (a timeout included), nothing of the spawner's outlives the test.
      onTestFinished(() => {
        for (const pid of logLines(pids).map(Number)) {
          if (!alive(pid) || groupOf(pid) === groupOf(process.pid)) continue;
          try {
            process.kill(pid, 'SIGKILL');
          } catch {}
        }
      });
      const run = cli.start([
        'lock',
        key,
        '--url',
        redisUrl,
        '--ttl',
        '1500',
        '--grace',
        '600000',
        '--',
        'sh',
        '-c',
        leader,
      ]);
      await until('the spawner runs', () => logLines(pids).length >= 20);
      // The premise: processes of the session in groups other than the leader's (perl's setpgrp worked).
      const groups = new Set(
        logLines(pids)
          .map(Number)
          .map(groupOf)
          .filter((g) => g > 0),
      );
      expect(groups.size).toBeGreaterThan(2);
      expect(await raw.del(lockKeys('fencekit:', key).lock)).toBe(1);
      expect(await run.exited()).toBe(137); // the test's 60 s timeout is far within the grace
      expect(logLines(pids).map(Number).filter(alive)).toEqual([]);
    }, 60_000);
  });

  describe('signals sent to the CLI', () => {
    it.each(['SIGINT', 'SIGTERM'] as const)(
      '%s is forwarded to the command; its code is the exit code; the lock is released',
      async (signal) => {
        const key = name('forward');
        const file = log();
        const run = cli.start([
          'lock',
          key,
          '--url',
          redisUrl,
          '--',
          ...loggingCommand(file, 'A', 20_000, 'log-and-exit'),
        ]);
        await until('the command runs', () => logLines(file).length === 1);
        run.child.kill(signal);
        expect(await run.exited()).toBe(5);
        expect(logLines(file).map((l) => l.split(' ')[0])).toEqual(['start', signal]);
        expect(await raw.exists(lockKeys('fencekit:', key).lock)).toBe(0);
      },
    );

    it('SIGTERM while waiting for the lock: no command runs, exit 143', async () => {
      const key = name('waiting');
      const file = log();
      cli.start(['lock', key, '--url', redisUrl, '--', ...loggingCommand(file, 'A', 20_000, 'none')]);
      await until('A runs', () => logLines(file).length === 1);
      const waiting = cli.start([
        'lock',
        key,
        '--url',
        redisUrl,
        '--',
        ...loggingCommand(file, 'B', 100, 'none'),
      ]);
      await waitersReach(key, 1);
      waiting.child.kill('SIGTERM');
      expect(await waiting.exited()).toBe(143);
      expect(logLines(file).filter((l) => l.includes(' B '))).toEqual([]);
    });
  });

  // A member of the command's group that survives SIGTERM must be gone before the grant ends, on
  // every path. The next holder's command looks at the member when it starts: causal, not timed.
  describe('the grant ends only once every process of the command group is gone', () => {
    const members: number[] = [];
    afterEach(() => {
      for (const pid of members.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
    });
    const groupFiles = () => ({
      pidFile: join(dir, `member-${n}.pid`),
      ticks: join(dir, `ticks-${n}.txt`),
      go: join(dir, `go-${n}`),
      out: join(dir, `next-${n}.json`),
    });
    /** Waits for the member to run and write; its pid. */
    const memberStarted = async (files: { pidFile: string; ticks: string }) => {
      await until('the member ticks', () => logLines(files.ticks).length > 0);
      const pid = Number(readFileSync(files.pidFile, 'utf8'));
      members.push(pid);
      return pid;
    };
    /** After the member is gone its file stops growing: the same count a while later. */
    const expectNoMoreTicks = async (ticks: string, count: number) => {
      await new Promise((r) => setTimeout(r, 300));
      expect(logLines(ticks)).toHaveLength(count);
    };

    it.each(['the key deleted', 'force-release'] as const)(
      'lost (%s): the CLI ends after SIGKILL reached the member, not when the leader died',
      async (how) => {
        const key = name('group-lost');
        const files = groupFiles();
        const run = cli.start([
          'lock',
          key,
          '--url',
          redisUrl,
          '--ttl',
          '1500',
          '--grace',
          '300',
          '--',
          ...groupWithStubbornMember(files, 'sleeps'),
        ]);
        const member = await memberStarted(files);
        if (how === 'the key deleted') expect(await raw.del(lockKeys('fencekit:', key).lock)).toBe(1);
        else
          expect((await cli.run(['force-release', key, '--url', redisUrl, '--reason', 'test'])).code).toBe(0);
        expect(await run.exited()).toBe(137); // the leader's own end: SIGKILL
        expect(alive(member)).toBe(false);
        await expectNoMoreTicks(files.ticks, logLines(files.ticks).length);
      },
    );

    // The loss signal fires about a round trip before the lease can run out on the server: no
    // --grace is left then, or a member that outlives SIGTERM writes beside the next holder.
    it('lost as renewals stop reaching Redis: the member is gone before the next holder starts, --grace or not', async () => {
      const key = name('group-expired');
      const files = groupFiles();
      const [host = '', port = ''] = redisUrl.replace('redis://', '').split(':');
      const proxy = await FaultProxy.start({ host, port: Number(port) });
      try {
        const first = cli.start([
          'lock',
          key,
          '--url',
          `redis://${proxy.address}`,
          '--ttl',
          '1500',
          '--grace',
          '20000',
          '--',
          ...groupWithStubbornMember(files, 'sleeps'),
        ]);
        const member = await memberStarted(files);
        const next = cli.start(['lock', key, '--url', redisUrl, '--', ...nextHolderCommand(files)]);
        await waitersReach(key, 1);
        proxy.setMode({ kind: 'partition' });
        await until('the next holder ran', () => logLines(files.out).length > 0);
        const seen = JSON.parse(readFileSync(files.out, 'utf8'));
        expect(seen.memberAlive).toBe(false);
        expect(alive(member)).toBe(false);
        expect(await next.exited()).toBe(0);
        proxy.setMode({ kind: 'pass' });
        expect(await first.exited()).toBe(137);
        expect(first.stderr()).toMatch(/no longer held.*SIGKILL/);
      } finally {
        await proxy.close();
      }
    });

    const stopCommands = [
      ['lock', 'SIGTERM'],
      ['lock', 'SIGINT'],
      ['lock', 'SIGHUP'],
      ['semaphore', 'SIGTERM'],
      ['elect', 'SIGTERM'],
    ] as const;
    it.each(stopCommands)(
      '%s, %s to the CLI: the next holder starts after the member is gone',
      async (command, signal) => {
        const key = name('group-signal');
        const files = groupFiles();
        const args = (tail: string[]) => [
          command,
          key,
          ...(command === 'semaphore' ? ['--limit', '1'] : []),
          '--url',
          redisUrl,
          '--ttl',
          '3000',
          '--grace',
          '300',
          '--',
          ...tail,
        ];
        const first = cli.start(args(groupWithStubbornMember(files, 'sleeps')));
        const member = await memberStarted(files);
        const next = cli.start(args(nextHolderCommand(files)));
        if (command === 'semaphore')
          await eventually(
            'the next holder waits',
            async () => (await observer.semaphore?.(key, { limit: 1 }).inspect())?.waiters === 1,
            10_000,
          );
        else await waitersReach(key, 1);
        first.child.kill(signal);
        expect(await first.exited()).toBe(128 + constants.signals[signal]);
        await until('the next holder ran', () => logLines(files.out).length > 0);
        const seen = JSON.parse(readFileSync(files.out, 'utf8'));
        expect(seen.memberAlive).toBe(false);
        expect(alive(member)).toBe(false);
        await expectNoMoreTicks(files.ticks, seen.ticks);
        next.child.kill('SIGTERM');
      },
    );

    it('the command exits 0 leaving a member behind: it is stopped before the release, exit 0', async () => {
      const key = name('group-exit');
      const files = groupFiles();
      const args = (tail: string[]) => [
        'lock',
        key,
        '--url',
        redisUrl,
        '--ttl',
        '3000',
        '--grace',
        '300',
        '--',
        ...tail,
      ];
      const first = cli.start(args(groupWithStubbornMember(files, 'exits-on-go')));
      const member = await memberStarted(files);
      const next = cli.start(args(nextHolderCommand(files)));
      await waitersReach(key, 1);
      writeFileSync(files.go, '');
      expect(await next.exited()).toBe(0);
      const seen = JSON.parse(readFileSync(files.out, 'utf8'));
      expect(seen.memberAlive).toBe(false);
      expect(alive(member)).toBe(false);
      await expectNoMoreTicks(files.ticks, seen.ticks);
      expect(await first.exited()).toBe(0);
      expect(first.stderr()).toMatch(/exited \(0\) but processes of its session \d+ still run/);
    });
  });

  it('semaphore: at most --limit commands at once across processes, all of them run', async () => {
    const key = name('sem');
    const file = log();
    const runs = ['A', 'B', 'C'].map((tag) =>
      cli.start([
        'semaphore',
        key,
        '--limit',
        '2',
        '--url',
        redisUrl,
        '--',
        ...loggingCommand(file, tag, 800, 'none'),
      ]),
    );
    for (const run of runs) expect(await run.exited()).toBe(0);
    let running = 0;
    let most = 0;
    for (const line of logLines(file)) {
      running += line.startsWith('start') ? 1 : -1;
      most = Math.max(most, running);
    }
    expect(logLines(file)).toHaveLength(6);
    expect(most).toBe(2);
  });

  it('inspect --json: name, holder, token, since, ageMs, expiresAt, waiters; and the table', async () => {
    const key = name('inspect');
    const file = log();
    cli.start([
      'lock',
      key,
      '--url',
      redisUrl,
      '--owner',
      'ops-7',
      '--ttl',
      '5000',
      '--',
      ...loggingCommand(file, 'A', 20_000, 'none'),
    ]);
    await until('A runs', () => logLines(file).length === 1);
    cli.start(['lock', key, '--url', redisUrl, '--', 'true']);
    const token = logLines(file)[0]?.split(' ')[2];
    await waitersReach(key, 1);
    const out = await cli.run(['inspect', key, `${key}-free`, '--url', redisUrl, '--json']);
    expect(out.code).toBe(0);
    const rows: Array<Record<string, unknown>> = JSON.parse(out.stdout);
    expect(rows[0]).toMatchObject({ name: key, holder: 'ops-7', token, waiters: 1 });
    expect(Date.parse(String(rows[0]?.since))).toBeLessThanOrEqual(Date.now());
    expect(rows[0]?.ageMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(String(rows[0]?.expiresAt))).toBeGreaterThan(Date.parse(String(rows[0]?.since)));
    expect(rows[1]).toEqual({
      name: `${key}-free`,
      holder: null,
      token: null,
      since: null,
      ageMs: null,
      expiresAt: null,
      waiters: 0,
      queue: [],
    });
    const table = await cli.run(['inspect', key, '--url', redisUrl]);
    expect(table.stdout).toMatch(/^NAME +HOLDER +TOKEN +AGE +EXPIRES +WAITERS\n/);
    expect(table.stdout).toMatch(new RegExp(`${key} +ops-7 +${token} +\\d+\\.\\ds +in \\d+\\.\\ds +1`));
  });

  it('inspect shows the waiter queue of two waiting CLIs in grant order: owner, wait, requests', async () => {
    const key = name('inspect-queue');
    const file = log();
    cli.start([
      'lock',
      key,
      '--url',
      redisUrl,
      '--owner',
      'ops-7',
      '--',
      ...loggingCommand(file, 'A', 20_000, 'none'),
    ]);
    await until('A runs', () => logLines(file).length === 1);
    cli.start(['lock', key, '--url', redisUrl, '--owner', 'waiter-1', '--', 'true']);
    await waitersReach(key, 1);
    cli.start(['lock', key, '--url', redisUrl, '--owner', 'waiter-2', '--', 'true']);
    await waitersReach(key, 2);
    const out = await cli.run(['inspect', key, '--url', redisUrl, '--json']);
    expect(out.code, out.stderr).toBe(0);
    const [row] = JSON.parse(out.stdout);
    expect(row).toMatchObject({ name: key, holder: 'ops-7', waiters: 2 });
    // Each waiting CLI is another process: how many requests its line holds only it knows.
    expect(row.queue).toMatchObject([
      { position: 1, owner: 'waiter-1', requests: null },
      { position: 2, owner: 'waiter-2', requests: null },
    ]);
    for (const entry of row.queue) {
      expect(Date.parse(entry.since)).toBeLessThanOrEqual(Date.now());
      expect(entry.waitingMs).toBeGreaterThanOrEqual(0);
    }
    const table = await cli.run(['inspect', key, '--url', redisUrl]);
    const [names, queue] = table.stdout.split('\n\n');
    expect(names).toMatch(new RegExp(`${key} +ops-7 .* 2$`));
    expect(queue).toMatch(/^NAME +POSITION +OWNER +WAITING +REQUESTS\n/);
    expect(queue).toMatch(
      new RegExp(`${key} +1 +waiter-1 +\\d+\\.\\ds +-\n${key} +2 +waiter-2 +\\d+\\.\\ds +-\n$`),
    );
  });

  it('inspect prints the names when a queue cannot be read, and says why on stderr', async () => {
    const key = name('inspect-no-queue');
    const lock = await observer.acquire(key, { ttlMs: 20_000 });
    try {
      // A live waiter, and a queue key that is not a sorted set: inspect counts the waiter, the
      // queue's read fails (WRONGTYPE).
      const [seconds] = await raw.time();
      await raw.zadd(`fencekit:{${key}}:waiters`, (Number(seconds) + 60) * 1_000, 'someone');
      await raw.set(`fencekit:{${key}}:arrivals`, 'not a sorted set');
      const out = await cli.run(['inspect', key, '--url', redisUrl, '--json']);
      expect(out.code, out.stderr).toBe(0);
      const [row] = JSON.parse(out.stdout);
      expect(row).toMatchObject({ name: key, waiters: 1, queue: null });
      expect(row.queueNote).toMatch(/WRONGTYPE/);
      const table = await cli.run(['inspect', key, '--url', redisUrl]);
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout).toMatch(new RegExp(`^NAME .*\n${key} .*${lock.fencingToken} `));
      expect(table.stderr).toContain(`the queue of ${key}: `);
    } finally {
      await raw.del(`fencekit:{${key}}:waiters`, `fencekit:{${key}}:arrivals`);
      await lock.release();
    }
  });

  it.each([
    ['etcd', () => etcdUrl, []],
    ['redis', () => redisUrl, ['--ttl', '1500']],
  ])(
    '%s: elect runs one command at a time across two CLIs; leader and observe follow a failover after kill -9 of the leader',
    async (_b, url, ttl) => {
      const key = name('elect');
      const file = log();
      const watch = cli.start(['observe', key, '--url', url(), '--json']);
      const candidates = ['A', 'B'].map((tag) =>
        cli.start([
          'elect',
          key,
          '--url',
          url(),
          '--owner',
          `node-${tag}`,
          ...ttl,
          '--',
          ...loggingCommand(file, tag, 20_000, 'none'),
        ]),
      );
      await until('a leader runs its command', () => logLines(file).length === 1);
      const [, first, firstTerm, firstPid] = logLines(file)[0]?.split(' ') ?? [];
      const leader = await cli.run(['leader', key, '--url', url(), '--json']);
      expect(leader.code).toBe(0);
      expect(JSON.parse(leader.stdout)).toEqual({ name: key, leader: `node-${first}`, term: firstTerm });
      expect(logLines(file)).toHaveLength(1); // the other candidate waits
      // kill -9 of the leader CLI and of its command (a process group of its own), as a service
      // manager stopping the unit's cgroup does.
      const leaderRun = candidates[first === 'A' ? 0 : 1];
      process.kill(-(leaderRun?.child.pid ?? 0), 'SIGKILL');
      process.kill(-Number(firstPid), 'SIGKILL');
      await until('the other candidate takes over', () => logLines(file).length === 2, 20_000);
      const [, second, secondTerm] = logLines(file)[1]?.split(' ') ?? [];
      expect(second).not.toBe(first);
      expect(BigInt(secondTerm ?? '')).toBeGreaterThan(BigInt(firstTerm ?? ''));
      await until("the killed leader's command is gone", () => !alive(Number(firstPid)), 5_000);
      await until('observe reports the new leader', () =>
        watch.stdout().includes(`"leader":"node-${second}"`),
      );
      const seen = watch
        .stdout()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .filter((l) => l.leader !== null); // "no leader" lines: before the first term, between terms
      expect(seen[0]).toMatchObject({ name: key, leader: `node-${first}`, term: firstTerm });
      expect(seen.at(-1)).toMatchObject({ name: key, leader: `node-${second}`, term: secondTerm });
      // SIGTERM to the new leader's CLI: forwarded to its command, which dies of it; the CLI resigns.
      const secondRun = candidates[first === 'A' ? 1 : 0];
      secondRun?.child.kill('SIGTERM');
      expect(await secondRun?.exited()).toBe(143);
      const none = await cli.run(['leader', key, '--url', url()]);
      expect(none.code).toBe(1);
      expect((await cli.run(['leader', key, '--url', url(), '--wait', '200'])).code).toBe(75);
      watch.child.kill('SIGINT');
      expect(await watch.exited()).toBe(130);
    },
  );

  it('elect: SIGTERM to a candidate still campaigning stops it with 143, and it never runs its command', async () => {
    const key = name('campaigning');
    const file = log();
    cli.start(['elect', key, '--url', redisUrl, '--', ...loggingCommand(file, 'A', 20_000, 'none')]);
    await until('A leads', () => logLines(file).length === 1);
    const waiting = cli.start([
      'elect',
      key,
      '--url',
      redisUrl,
      '--',
      ...loggingCommand(file, 'B', 100, 'none'),
    ]);
    await waitersReach(key, 1);
    waiting.child.kill('SIGTERM');
    expect(await waiting.exited()).toBe(143);
    expect(logLines(file).filter((l) => l.includes(' B '))).toEqual([]);
  });

  it("ls lists the held name; force-release removes it and the holder's command gets SIGKILL", async () => {
    const key = name('admin');
    const file = log();
    const run = cli.start([
      'lock',
      key,
      '--url',
      redisUrl,
      '--ttl',
      '1500',
      '--',
      ...loggingCommand(file, 'A', 20_000, 'none'),
    ]);
    await until('the command runs', () => logLines(file).length === 1);
    const ls = await cli.run(['ls', 'cli-test/admin/', '--url', redisUrl]);
    expect(ls.code).toBe(0);
    expect(ls.stdout.split('\n')).toContain(key);
    // Guarded by a token that is not the holder's: nothing is removed, the command runs on.
    const spared = await cli.run([
      'force-release',
      key,
      '--url',
      redisUrl,
      '--reason',
      'stale',
      '--token',
      '999999999',
    ]);
    expect(spared.code).toBe(0);
    expect(spared.stdout).toMatch(/was not held with token 999999999/);
    expect((await observer.inspect(key))?.holder).not.toBeNull();
    const badToken = await cli.run([
      'force-release',
      key,
      '--url',
      redisUrl,
      '--reason',
      'x',
      '--token',
      '-1',
    ]);
    expect(badToken.code).toBe(64);
    const released = await cli.run(['force-release', key, '--url', redisUrl, '--reason', 'stuck job']);
    expect(released.code).toBe(0);
    expect(released.stdout).toMatch(/released/);
    expect(await run.exited()).toBe(137); // the holder learns at its next renewal
  });
});
