#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { Command, InvalidArgumentError as CommanderArgumentError } from 'commander';
import { connect } from '../connect.js';
import { FencekitError } from '../errors.js';
import type { LockProvider } from '../types.js';
import { pauseMemoryClient, runDemo } from './demo.js';

const program = new Command('fencekit').description(
  'Distributed locks with fencing tokens over etcd, ZooKeeper, Redis, PostgreSQL or memory',
);

const milliseconds = (value: string): number => {
  const ms = Number(value);
  if (!Number.isFinite(ms) || ms < 0) throw new CommanderArgumentError('expected a number of milliseconds');
  return ms;
};

program
  .command('demo')
  .description('the double-charge story: a paused lock holder, without and with fencing')
  .option('--url <url>', 'backend to run it on', 'memory://demo')
  .option('--ttl <ms>', 'lease length', milliseconds, 1000)
  .action(async (opts: { url: string; ttl: number }) => {
    if (!opts.url.startsWith('memory:')) {
      // Pausing worker A for real (SIGSTOP of a child process) comes with the network adapters.
      await (await connect(opts.url)).close();
      throw new FencekitError(
        'NOT_IMPLEMENTED',
        `the demo on ${opts.url.split(':')[0]} is not implemented yet`,
      );
    }
    console.log(
      `fencekit demo on ${opts.url}: worker A pauses longer than its lease while holding "orders/42"`,
    );
    const results = await runDemo(
      () => connect(opts.url),
      pauseMemoryClient,
      (line) => console.log(line),
      opts.ttl,
    );
    console.log('');
    console.log(
      `Summary: without fencing ${results[0]?.charges} charges, with fencing ${results[1]?.charges} charge.` +
        ' A TTL alone cannot stop a paused holder; the storage checking the token can.',
    );
  });

program
  .command('inspect')
  .description('show the holder and waiters of a lock')
  .argument('<key>', 'lock name')
  .requiredOption('--url <url>', 'backend URL')
  .action(async (key: string, opts: { url: string }) => {
    await withProvider(opts.url, async (provider) => {
      const info = await provider.inspect(key);
      console.log(JSON.stringify(info, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2));
    });
  });

program
  .command('run')
  .description('run a command while holding a lock; FENCEKIT_FENCING_TOKEN is set for it')
  .argument('<key>', 'lock name')
  .argument('<command...>', 'command and arguments (after --)')
  .requiredOption('--url <url>', 'backend URL')
  .option('--wait <ms>', 'give up after this long (exit 75)', milliseconds)
  .option('--ttl <ms>', 'lease length', milliseconds)
  .action(async (key: string, command: string[], opts: { url: string; wait?: number; ttl?: number }) => {
    await withProvider(opts.url, async (provider) => {
      const lock = await provider.acquire(key, {
        ...(opts.wait === undefined ? {} : { waitMs: opts.wait }),
        ...(opts.ttl === undefined ? {} : { ttlMs: opts.ttl }),
        owner: `fencekit-run pid ${process.pid}`,
      });
      const [file = '', ...args] = command;
      const child = spawn(file, args, {
        stdio: 'inherit',
        env: { ...process.env, FENCEKIT_LOCK_KEY: key, FENCEKIT_FENCING_TOKEN: lock.fencingToken.toString() },
      });
      // Losing the lock stops the work: the child gets SIGTERM.
      lock.signal.addEventListener('abort', () => child.kill('SIGTERM'), { once: true });
      const code = await new Promise<number>((resolve) => {
        child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 : 1)));
        child.on('error', (error) => {
          console.error(`fencekit run: ${error.message}`);
          resolve(127);
        });
      });
      await lock.release();
      process.exitCode = code;
    });
  });

async function withProvider(url: string, body: (provider: LockProvider) => Promise<void>): Promise<void> {
  const provider = await connect(url);
  try {
    await body(provider);
  } finally {
    await provider.close();
  }
}

program.parseAsync().catch((error: unknown) => {
  if (error instanceof FencekitError) {
    console.error(`fencekit: ${error.message} [${error.code}]`);
    process.exitCode = error.code === 'LOCK_TIMEOUT' ? 75 : 2;
    return;
  }
  console.error(error);
  process.exitCode = 1;
});
