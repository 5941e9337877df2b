import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';

/** Runs etcdctl against a test server; `lines` fills with its output as it comes. */
export function etcdctl(endpoints: string, args: string[]): { child: ChildProcess; lines: string[] } {
  const child = spawn('etcdctl', ['--endpoints', endpoints, ...args], {
    env: { ...process.env, ETCDCTL_API: '3' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  child.stdout?.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
  return { child, lines };
}

/** Signals a child process (default SIGINT) and waits until it has exited; a no-op if it already has. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGINT'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}
