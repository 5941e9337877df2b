#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { FencekitError } from '../errors.js';
import { VERSION } from '../version.js';
import { registerAdminCommands } from './commands/admin.js';
import { registerDemoCommands } from './commands/demo.js';
import { registerElectionCommands } from './commands/elect.js';
import { registerLockCommands } from './commands/lock.js';
import { registerDashboardCommand } from './dashboard/command.js';
import { exitCodeFor } from './exit-codes.js';
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

registerDemoCommands(program, fileURLToPath(import.meta.url));
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
