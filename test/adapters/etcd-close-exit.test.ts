import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { etcdFixture } from '../servers/etcd-fixture.js';

// A process that closed its etcd provider exits by itself, even when etcd does not answer at that
// moment. The etcd3 client ended its watch stream only once etcd answered the cancel of its last
// watch, and gRPC keeps a connection open while a call on it is active: under a blackhole the
// closed provider's process never exited (the torture's "did not stop within 15 s" is that check).
// The child imports the built package (npm test builds first).
const root = resolve(import.meta.dirname, '../..');
/** close() is bounded by callTimeoutMs + 1 s (2 s here); the rest is a loaded machine's margin. */
const EXIT_BOUND_MS = 10_000;

describe('etcd: a closed provider keeps no process alive while etcd does not answer', () => {
  const etcd = etcdFixture();

  it('read-write grants and a waiter, then a blackhole, then close(): the process exits', async () => {
    await etcd.throughProxy(async (proxy) => {
      const program = `
        import { EtcdLockProvider } from '${root}/dist/etcd.js';
        const p = new EtcdLockProvider({
          endpoints: ['http://${proxy.address}'], sessionTtlMs: 2000, callTimeoutMs: 1000,
        });
        const name = 'close-exit-' + process.pid;
        await p.readWriteLock(name).acquireRead();
        await p.readWriteLock(name + '-w').acquireWrite();
        const waiting = p.readWriteLock(name).acquireWrite({ waitMs: 60000 }).catch((e) => e.code);
        await new Promise((r) => setTimeout(r, 300)); // the waiter's watch is made
        console.log('ready');
        process.stdin.once('data', async () => {
          process.stdin.destroy();
          await p.close();
          console.log('closed ' + (await waiting));
        });`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', program], {
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      let output = '';
      const lines = (wanted: string) =>
        new Promise<void>((done) => {
          const onData = (chunk: Buffer) => {
            output += chunk.toString();
            if (output.includes(wanted)) {
              child.stdout?.off('data', onData);
              done();
            }
          };
          child.stdout?.on('data', onData);
        });
      const exited = new Promise<boolean>((done) => child.once('exit', () => done(true)));
      try {
        await lines('ready');
        proxy.setMode({ kind: 'blackhole' });
        child.stdin?.write('close\n');
        await lines('closed');
        let timer: NodeJS.Timeout | undefined;
        const byItself = await Promise.race([
          exited,
          new Promise<boolean>((done) => {
            timer = setTimeout(() => done(false), EXIT_BOUND_MS);
          }),
        ]);
        clearTimeout(timer);
        expect(output).toContain('closed PROVIDER_CLOSED');
        expect(byItself, `still running ${EXIT_BOUND_MS} ms after close() resolved`).toBe(true);
      } finally {
        child.kill('SIGKILL');
        proxy.setMode({ kind: 'pass' });
      }
    });
  }, 60_000);
});
