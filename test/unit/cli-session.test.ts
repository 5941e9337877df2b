import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runChild } from '../../src/cli/child.js';
import { Interrupts } from '../../src/cli/interrupts.js';
import { type PidLister, parseStat, scanSession, sessionIsEmpty } from '../../src/cli/session.js';

describe('the CLI command session', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fencekit-cli-unit-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('parseStat reads the fields after the last parenthesis (comm may hold spaces and parentheses)', () => {
    expect(parseStat('4242 (a) b (c) d)) S 1 77 88 0 -1 4194304')).toEqual({
      state: 'S',
      pgrp: 77,
      session: 88,
    });
    expect(parseStat('7 (x) Z 1 7 7 0')).toEqual({ state: 'Z', pgrp: 7, session: 7 });
    expect(parseStat('no parenthesis here')).toBeUndefined();
    expect(parseStat('9 (cut')).toBeUndefined();
  });

  it('scanSession finds a detached command and its child in another group; empty once they end', async () => {
    const child = spawn('bash', ['-c', 'set -m; sleep 30 & wait'], { detached: true, stdio: 'ignore' });
    const sid = child.pid ?? 0;
    const exited = new Promise((r) => child.once('exit', r));
    try {
      let scan = await scanSession(sid, new Set());
      for (let i = 0; i < 100 && scan.groups.size < 2; i++) {
        await new Promise((r) => setTimeout(r, 50));
        scan = await scanSession(sid, new Set());
      }
      expect(scan.live).toBe(true);
      expect(scan.groups.size).toBe(2); // the shell's and the job's (set -m: job control)
      for (const pgid of scan.groups) process.kill(-pgid, 'SIGKILL');
      await exited;
      let after = await scanSession(sid, scan.groups);
      for (let i = 0; i < 100 && after.live; i++) {
        await new Promise((r) => setTimeout(r, 50));
        after = await scanSession(sid, scan.groups);
      }
      expect(after.live).toBe(false);
    } finally {
      try {
        process.kill(-sid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  });

  it('runChild does not start the command once the CLI was signalled (a signal during the acquire)', async () => {
    // Only the CLI's handler sees this SIGTERM (the test runner's own are set aside meanwhile).
    const others = process.listeners('SIGTERM');
    process.removeAllListeners('SIGTERM');
    const interrupts = new Interrupts();
    const marker = join(dir, 'started');
    try {
      process.emit('SIGTERM', 'SIGTERM');
      const run = runChild({
        command: ['sh', '-c', `touch '${marker}'`],
        env: {},
        stop: new AbortController().signal,
        graceMs: 1_000,
        interrupts,
        onStop: () => undefined,
      });
      await expect(run).rejects.toThrow(/SIGTERM/);
      await new Promise((r) => setTimeout(r, 300));
      expect(existsSync(marker)).toBe(false);
    } finally {
      interrupts.dispose();
      for (const listener of others) process.on('SIGTERM', listener);
    }
  });

  // A group id is free again once its group is empty, and the kernel may give it to an unrelated
  // group (another user's, or anything under root). A remembered group that the session no
  // longer has a member in is that case: here a detached `sleep` outside the command's session.
  describe('a remembered group with no member of the session left', () => {
    async function endedSession(): Promise<number> {
      const leader = spawn('true', [], { detached: true, stdio: 'ignore' });
      await new Promise((r) => leader.once('exit', r));
      return leader.pid ?? 0;
    }

    async function withOutsider(
      body: (outsider: number, alive: () => boolean) => Promise<void>,
    ): Promise<void> {
      const outsider = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
      const pgid = outsider.pid ?? 0;
      let exited = false;
      outsider.once('exit', () => {
        exited = true;
      });
      try {
        await body(pgid, () => !exited);
      } finally {
        try {
          process.kill(-pgid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    }

    it('is not signalled when the session is found empty', async () => {
      const sid = await endedSession();
      await withOutsider(async (outsider, alive) => {
        expect(await sessionIsEmpty(sid, new Set([sid, outsider]))).toBe(true);
        await new Promise((r) => setTimeout(r, 300));
        expect(alive()).toBe(true);
      });
    });

    it('does not count as live when /proc does not list it (hidden, or another user)', async () => {
      const sid = await endedSession();
      await withOutsider(async (outsider, alive) => {
        const hiding: PidLister = async () =>
          (await readdir('/proc')).filter((entry) => /^\d+$/.test(entry) && entry !== String(outsider));
        const scan = await scanSession(sid, new Set([sid, outsider]), hiding);
        expect(scan.live).toBe(false);
        expect([...scan.groups]).not.toContain(outsider);
        expect(await sessionIsEmpty(sid, new Set([sid, outsider]), hiding)).toBe(true);
        await new Promise((r) => setTimeout(r, 300));
        expect(alive()).toBe(true);
      });
    });
  });
});
