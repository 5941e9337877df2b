#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError as CommanderArgumentError } from 'commander';
import { connect } from '../connect.js';
import { FencekitError } from '../errors.js';
import type { LockProvider } from '../types.js';
import { type DemoResult, pauseMemoryClient, RUN_TITLES, runDemo } from './demo.js';
import { demoWorker, runProcessStory } from './demo-process.js';

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
    const onMemory = opts.url.startsWith('memory:');
    console.log(
      `fencekit demo on ${opts.url}: worker A pauses longer than its lease while holding "orders/42"` +
        (onMemory ? ' (in-process pause)' : ' (worker A is a child process, stopped with SIGSTOP)'),
    );
    const print = (line: string) => console.log(line);
    let results: DemoResult[];
    if (onMemory) {
      results = await runDemo(() => connect(opts.url), pauseMemoryClient, print, opts.ttl);
    } else {
      results = [];
      for (const fencing of [false, true]) {
        print('');
        print(fencing ? RUN_TITLES.fenced : RUN_TITLES.unfenced);
        const result = await runProcessStory(
          opts.url,
          fileURLToPath(import.meta.url),
          fencing,
          opts.ttl,
          print,
        );
        print(
          `  => ${result.charges} charge${result.charges === 1 ? '' : 's'}${fencing ? `, ${result.rejected} stale write rejected` : ''}`,
        );
        results.push(result);
      }
    }
    console.log('');
    console.log(
      results[0]?.charges === 1
        ? 'Summary: 1 charge in both runs. This lock has no TTL: it lives with its connection, which a' +
            ' stopped process keeps open, so B waited instead of overtaking A. Fencing still guards the' +
            ' storage against a holder whose connection did drop.'
        : `Summary: without fencing ${results[0]?.charges} charges, with fencing ${results[1]?.charges}.` +
            ' A TTL alone cannot stop a paused holder; the storage checking the token can.',
    );
  });

program
  .command('demo-worker', { hidden: true })
  .requiredOption('--url <url>')
  .requiredOption('--key <key>')
  .option('--ttl <ms>', 'lease length', milliseconds, 1000)
  .action(async (opts: { url: string; key: string; ttl: number }) => {
    await demoWorker(opts.url, opts.key, opts.ttl);
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
      if (lock.signal.aborted) {
        // Lost between grant and here (a pause): the command must not start without the lock.
        await lock.release();
        throw lock.signal.reason;
      }
      const [file = '', ...args] = command;
      const child = spawn(file, args, {
        stdio: 'inherit',
        env: { ...process.env, FENCEKIT_LOCK_KEY: key, FENCEKIT_FENCING_TOKEN: lock.fencingToken.toString() },
        // Losing the lock stops the work: the child gets SIGTERM (at once if already lost).
        signal: lock.signal,
        killSignal: 'SIGTERM',
      });
      const code = await new Promise<number>((resolve) => {
        child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 : 1)));
        child.on('error', (error) => {
          if (error.name === 'AbortError') return; // the lock was lost: 'exit' follows the kill
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

/** sysexits(3): EX_TEMPFAIL for a timeout, EX_UNAVAILABLE for a backend that did not answer. */
const EXIT_CODES: Partial<Record<string, number>> = { LOCK_TIMEOUT: 75, BACKEND_UNAVAILABLE: 69 };

program.parseAsync().catch((error: unknown) => {
  if (error instanceof FencekitError) {
    console.error(`fencekit: ${error.message} [${error.code}]`);
    process.exitCode = EXIT_CODES[error.code] ?? 2;
    return;
  }
  console.error(error);
  process.exitCode = 1;
});
