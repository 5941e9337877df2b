#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { connect } from '../connect.js';
import { FencekitError } from '../errors.js';
import { displayUrl } from '../url-display.js';
import { VERSION } from '../version.js';
import { registerAdminCommands } from './commands/admin.js';
import { registerElectionCommands } from './commands/elect.js';
import { registerLockCommands } from './commands/lock.js';
import { registerDashboardCommand } from './dashboard/command.js';
import { type DemoResult, pauseMemoryClient, RUN_TITLES, runDemo } from './demo.js';
import { demoWorker, runProcessStory } from './demo-process.js';
import { exitCodeFor } from './exit-codes.js';
import { milliseconds } from './options.js';
import { printError } from './output.js';

const program = new Command('fencekit')
  .description('Distributed locks with fencing tokens over etcd, ZooKeeper, Redis, PostgreSQL or memory')
  .version(VERSION, '-V, --version', 'print the version of fencekit');

// A reader that went away (EPIPE: `fencekit … | head`, a closed log pipe) must not crash the CLI
// while it holds a grant and runs a command: what it had to say is lost, nothing else.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);

// Usage errors throw (exit 64) instead of exiting 1; what commander prints is redacted too.
program.exitOverride().configureOutput({ writeErr: (text) => printError(text) });
program.addHelpText(
  'after',
  `
Every command takes --url or FENCEKIT_URL; --ca, --cert, --key (or FENCEKIT_CA, FENCEKIT_CERT,
FENCEKIT_KEY) name TLS files; --user names the user, whose password comes from FENCEKIT_PASSWORD or
--password-file, never from the command line. Exit codes: the command's own; 128+n when signal n
killed it; 1 other failure; 64 invalid argument; 69 backend unavailable; 77 credentials or a
certificate refused; 71 the command's processes outlived SIGKILL (the CLI waited for them, then
left without releasing); 75 timed out.`,
);

program
  .command('demo')
  .description('the double-charge story: a paused lock holder, without and with fencing')
  .option('--url <url>', 'backend to run it on', 'memory://demo')
  .option('--ttl <ms>', 'lease length', milliseconds, 1000)
  .action(async (opts: { url: string; ttl: number }) => {
    const onMemory = opts.url.startsWith('memory:');
    console.log(
      `fencekit demo on ${displayUrl(opts.url)}: worker A pauses longer than its lease while holding "orders/42"` +
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

registerLockCommands(program);
registerElectionCommands(program);
registerAdminCommands(program);
registerDashboardCommand(program);

program
  .parseAsync()
  .catch((error: unknown) => {
    if (error instanceof CommanderError) {
      // commander printed it already (through printError); --help and --version exit 0
    } else if (error instanceof FencekitError) {
      printError(`fencekit: ${error.message} [${error.code}]\n`);
    } else {
      printError(`fencekit: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    }
    process.exitCode = exitCodeFor(error);
  })
  .finally(() => {
    // A client library that keeps a handle open must not keep a finished command alive.
    setTimeout(() => process.exit(), 3000).unref();
  });
