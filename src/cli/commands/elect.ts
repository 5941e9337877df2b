import type { Command } from 'commander';
import { createElection } from '../../election/lock-election.js';
import { runAsLeader } from '../../election/run-as-leader.js';
import type { Election, LeaderInfo } from '../../election/types.js';
import { linkSignals } from '../../signals.js';
import { cliAction } from '../action.js';
import { runChild } from '../child.js';
import { type ConnectionFlags, connectionOptions, providerAction, withProvider } from '../connection.js';
import { EXIT } from '../exit-codes.js';
import { DEFAULT_GRACE_MS, defaultOwner, milliseconds } from '../options.js';
import { warn } from '../output.js';
import { describe } from './lock.js';

interface ElectFlags extends ConnectionFlags {
  owner?: string;
  ttl?: number;
  grace: number;
}

export function registerElectionCommands(program: Command): void {
  connectionOptions(program.command('elect'))
    .description(
      'run a command only while leader; campaign again after it ends (until SIGINT/SIGTERM/SIGHUP)',
    )
    .argument('<name>', 'election name')
    .argument('<command...>', 'command and its arguments (after --)')
    .option('--owner <text>', 'the value observers see as leader (default <host>/<pid>)')
    .option(
      '--ttl <ms>',
      "leader's lease where the backend has per-lock leases (memory, Redis)",
      milliseconds,
    )
    .option(
      '--grace <ms>',
      "after SIGTERM to the command's session (CLI signalled, left-over processes), SIGKILL after this long; a lost term gets SIGKILL at once",
      milliseconds,
      DEFAULT_GRACE_MS,
    )
    .action(
      cliAction((interrupts, name: string, command: string[], flags: ElectFlags) =>
        withProvider(flags, async (provider) => {
          let code: number = EXIT.ok;
          // The loop stops when the CLI is signalled: at once while campaigning, and after the
          // command (which got the signal forwarded) has exited while leading.
          await runAsLeader(
            provider,
            name,
            async ({ signal, term }) => {
              code = await runChild({
                command,
                env: { FENCEKIT_LOCK_KEY: name, FENCEKIT_FENCING_TOKEN: term.toString() },
                stop: signal,
                graceMs: flags.grace,
                interrupts,
                onStop: (reason) =>
                  warn(`term ${term} ended (${describe(reason)}); sending SIGKILL to the command's session`),
              });
            },
            {
              value: flags.owner ?? defaultOwner(),
              signal: interrupts.signal,
              ...(flags.ttl === undefined ? {} : { ttlMs: flags.ttl }),
              onError: (error) => warn(`${describe(error)}`),
            },
          );
          // runAsLeader returns when stopped: a signal during a campaign or a backoff is no command's exit.
          if (interrupts.stoppedWaiting) throw interrupts.signal.reason;
          return code;
        }),
      ),
    );

  connectionOptions(program.command('leader'))
    .description('print the current leader (exit 1 when there is none, 75 when none came within --wait)')
    .argument('<name>', 'election name')
    .option('--wait <ms>', 'wait this long for a leader when there is none', milliseconds)
    .option('--json', 'one JSON object: {"name","leader","term"}')
    .action(
      providerAction(
        async (
          provider,
          name: string,
          flags: ConnectionFlags & { wait?: number; json?: boolean },
          interrupts,
        ) => {
          const election = createElection(provider, name);
          let leader = await election.leader();
          if (!leader && flags.wait !== undefined && flags.wait > 0) {
            leader = await firstLeader(election, flags.wait, interrupts.signal);
            if (!leader) {
              warn(`no leader of "${name}" within ${flags.wait} ms`);
              return EXIT.timeout;
            }
          }
          if (flags.json) console.log(JSON.stringify(leaderJson(name, leader)));
          else if (leader) console.log(`${leader.value}\tterm ${leader.term}`);
          if (!leader) {
            warn(`"${name}" has no leader`);
            return EXIT.failure;
          }
          return EXIT.ok;
        },
      ),
    );

  connectionOptions(program.command('observe'))
    .description('print the leader now and a line at every change, until SIGINT/SIGTERM/SIGHUP')
    .argument('<name>', 'election name')
    .option('--json', 'one JSON object a line: {"at","name","leader","term"}')
    .action(
      providerAction(
        async (provider, name: string, flags: ConnectionFlags & { json?: boolean }, interrupts) => {
          const election = createElection(provider, name);
          for await (const leader of election.observe({ signal: interrupts.signal })) {
            const at = new Date().toISOString();
            if (flags.json) console.log(JSON.stringify({ at, ...leaderJson(name, leader) }));
            else console.log(leader ? `${at} leader ${leader.value} term ${leader.term}` : `${at} no leader`);
          }
          // observe() ends only when stopped: the signal's exit code (cliAction).
          throw interrupts.signal.reason;
        },
      ),
    );
}

function leaderJson(name: string, leader: LeaderInfo | null) {
  return { name, leader: leader?.value ?? null, term: leader ? leader.term.toString() : null };
}

/** The first leader observed within ms, or null; stops observing either way. */
async function firstLeader(election: Election, ms: number, stop: AbortSignal): Promise<LeaderInfo | null> {
  const watch = linkSignals([stop]);
  const timer = setTimeout(() => watch.abort(new Error('no leader in time')), ms);
  try {
    for await (const leader of election.observe({ signal: watch.signal })) if (leader) return leader;
    if (stop.aborted) throw stop.reason;
    return null;
  } finally {
    clearTimeout(timer);
    watch.abort(new Error('done'));
    watch.dispose();
  }
}
