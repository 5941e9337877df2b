import type { Command } from 'commander';
import { InvalidArgumentError, NotImplementedError } from '../../errors.js';
import { linkSignals } from '../../signals.js';
import type { AcquireOptions, Lock, LockProvider } from '../../types.js';
import { cliAction } from '../action.js';
import { runChild } from '../child.js';
import { type ConnectionFlags, connectionOptions, withProvider } from '../connection.js';
import type { Interrupts } from '../interrupts.js';
import { DEFAULT_GRACE_MS, defaultOwner, milliseconds, positiveInteger } from '../options.js';
import { warn } from '../output.js';

interface GrantFlags extends ConnectionFlags {
  wait?: number;
  ttl?: number;
  owner?: string;
  grace: number;
}

/** The options every "run a command under a grant" command shares. */
function grantOptions(command: Command): Command {
  return connectionOptions(command)
    .argument('<name>', 'lock name')
    .argument('<command...>', 'command and its arguments (after --)')
    .option('--wait <ms>', 'give up after this long (exit 75); 0 = try once; default: wait', milliseconds)
    .option('--ttl <ms>', 'lease length where the backend has per-lock leases (memory, Redis)', milliseconds)
    .option('--owner <text>', 'owner text shown by inspect (default <host>/<pid>)')
    .option(
      '--grace <ms>',
      "after SIGTERM to the command's session (CLI signalled, left-over processes), SIGKILL after this long; a lost grant gets SIGKILL at once",
      milliseconds,
      DEFAULT_GRACE_MS,
    );
}

interface LockFlags extends GrantFlags {
  read?: boolean;
  write?: boolean;
}

export function registerLockCommands(program: Command): void {
  grantOptions(
    program
      .command('lock')
      .alias('run')
      .description('run a command while holding a lock (FENCEKIT_FENCING_TOKEN, FENCEKIT_LOCK_KEY set)')
      .option('--read', "hold the name's read-write lock for reading: readers share")
      .option('--write', "hold the name's read-write lock for writing: excludes readers and writers"),
  ).action(
    cliAction((interrupts, name: string, command: string[], flags: LockFlags) =>
      withProvider(flags, (provider) =>
        runUnderGrant(name, command, flags, interrupts, grantOf(provider, name, flags)),
      ),
    ),
  );

  grantOptions(
    program
      .command('semaphore')
      .description('run a command while holding one of --limit permits (same env as lock)')
      .requiredOption('--limit <k>', 'how many may run at once (the same in every process)', positiveInteger),
  ).action(
    cliAction((interrupts, name: string, command: string[], flags: GrantFlags & { limit: number }) =>
      withProvider(flags, (provider) => {
        const semaphore = semaphoreOf(provider, name, flags.limit);
        return runUnderGrant(name, command, flags, interrupts, (opts) => semaphore.acquire(opts));
      }),
    ),
  );
}

/**
 * What `lock` acquires: the plain lock, or with --read / --write the name's read-write lock (a
 * name of its own on every backend: a plain lock of that name does not exclude it).
 */
function grantOf(
  provider: LockProvider,
  name: string,
  flags: LockFlags,
): (opts: AcquireOptions) => Promise<Lock> {
  if (flags.read && flags.write) throw new InvalidArgumentError('--read', 'give --read or --write, not both');
  if (!flags.read && !flags.write) return (opts) => provider.acquire(name, opts);
  if (!provider.readWriteLock)
    throw new NotImplementedError(`read-write locks on the ${provider.backend} provider`);
  const rw = provider.readWriteLock(name);
  return flags.read ? (opts) => rw.acquireRead(opts) : (opts) => rw.acquireWrite(opts);
}

function semaphoreOf(provider: LockProvider, name: string, limit: number) {
  if (!provider.semaphore) throw new NotImplementedError(`semaphores on the ${provider.backend} provider`);
  return provider.semaphore(name, { limit });
}

/** Acquires, runs the command while the grant holds, releases; resolves with the exit code. */
async function runUnderGrant(
  name: string,
  command: string[],
  flags: GrantFlags,
  interrupts: Interrupts,
  acquire: (opts: AcquireOptions) => Promise<Lock>,
): Promise<number> {
  const lock = await acquire({
    owner: flags.owner ?? defaultOwner(),
    signal: interrupts.signal,
    ...(flags.wait === undefined ? {} : { waitMs: flags.wait }),
    ...(flags.ttl === undefined ? {} : { ttlMs: flags.ttl }),
  });
  // Derived, so a grant already lost (a pause between grant and here) aborts it at once and the
  // command never starts; disposed before release, whose own abort is no loss.
  const held = linkSignals([lock.signal]);
  try {
    if (held.signal.aborted) throw held.signal.reason;
    return await runChild({
      command,
      env: { FENCEKIT_LOCK_KEY: name, FENCEKIT_FENCING_TOKEN: lock.fencingToken.toString() },
      stop: held.signal,
      graceMs: flags.grace,
      interrupts,
      onStop: (reason) => warn(`${describe(reason)}; sending SIGKILL to the command's session`),
    });
  } finally {
    held.dispose();
    await releaseQuietly(lock);
  }
}

/** The command's exit code matters more than a failed release: the lease frees the key anyway. */
export async function releaseQuietly(grant: { release(): Promise<void> }): Promise<void> {
  try {
    await grant.release();
  } catch (error) {
    warn(`release failed (the lease will free it): ${describe(error)}`);
  }
}

export function describe(reason: unknown): string {
  return reason instanceof Error ? reason.message : String(reason);
}
