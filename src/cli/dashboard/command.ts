/**
 * `fencekit dashboard`: the names view, timeline and name detail of one backend, served from the
 * CLI on loopback by default. Binding anywhere else needs a token (--auth-token or
 * FENCEKIT_DASHBOARD_TOKEN); the token is masked in everything the process prints.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Command, InvalidArgumentError as CommanderArgumentError, Option } from 'commander';
import { InvalidArgumentError, NotImplementedError } from '../../errors.js';
import { processSecrets } from '../../secret-mask.js';
import type { BackendName } from '../../types.js';
import { validateKey } from '../../validate.js';
import { cliAction } from '../action.js';
import { type ConnectionFlags, connectionOptions, withProvider } from '../connection.js';
import { EXIT, exitCodeForSignal } from '../exit-codes.js';
import { milliseconds, operator } from '../options.js';
import { isLoopback } from './auth.js';
import { Poller } from './poller.js';
import { DashboardServer } from './server.js';

interface DashboardFlags extends ConnectionFlags {
  prefix: string;
  port: number;
  host: string;
  authToken?: string;
  allowForceRelease?: boolean;
  semaphore: string[];
  election: string[];
  interval: number;
}

/** The shortest token the dashboard accepts: a guessable one protects nothing. */
const MIN_TOKEN_LENGTH = 16;

/** How the dashboard sees changes on each backend: what the page and docs/dashboard.md say. */
export function backendNote(backend: BackendName, intervalMs: number): string {
  const polled = `polled every ${intervalMs} ms (list, then inspect per name)`;
  const expiry =
    backend === 'redis' || backend === 'memory' || backend === 'redlock'
      ? 'a grant gone after its lease ran out shows as a loss (expired)'
      : 'this backend has no per-lock leases, so a holder whose session ended shows as a release';
  return `Names and grants are ${polled}; ${expiry}. Force-releases made here come from the provider's event, with who, why and the token.`;
}

export function registerDashboardCommand(program: Command): void {
  connectionOptions(program.command('dashboard'))
    .description('serve a live page and a JSON API of who holds what, who waits and what was lost')
    .option('--prefix <prefix>', 'only names that start with this', '')
    .option('--port <n>', 'port to listen on (0: any free port)', port, 7420)
    .option('--host <address>', 'address to listen on; other than loopback needs --auth-token', '127.0.0.1')
    .addOption(
      new Option(
        '--auth-token <token>',
        `token every request must carry (at least ${MIN_TOKEN_LENGTH} characters)`,
      ).env('FENCEKIT_DASHBOARD_TOKEN'),
    )
    .option('--allow-force-release', 'offer force-release on the page and the API (a reason is required)')
    .option(
      '--semaphore <name=limit>',
      'also show this semaphore (list() does not enumerate them)',
      collect,
      [],
    )
    .option('--election <name>', 'show this name as an election (leader and term)', collect, [])
    .option('--interval <ms>', 'how often the backend is looked at', milliseconds, 500)
    .action(
      cliAction((interrupts, flags: DashboardFlags) => {
        const token = flags.authToken === '' ? undefined : flags.authToken;
        if (token !== undefined) processSecrets.add([token]);
        if (token !== undefined && token.length < MIN_TOKEN_LENGTH)
          throw new InvalidArgumentError('--auth-token', `shorter than ${MIN_TOKEN_LENGTH} characters`);
        if (!isLoopback(flags.host) && token === undefined)
          throw new InvalidArgumentError(
            '--host',
            `${flags.host} is not a loopback address: give --auth-token (or FENCEKIT_DASHBOARD_TOKEN) to serve it there`,
          );
        if (flags.interval < 50) throw new InvalidArgumentError('--interval', 'at least 50 ms');
        const semaphores = new Map(flags.semaphore.map(semaphoreSpec));
        for (const name of flags.election) validateKey(name, '--election');
        return withProvider(flags, async (provider) => {
          // What every look needs is checked once here: a missing one is no outage to show.
          if (!provider.list)
            throw new NotImplementedError(`listing names on the ${provider.backend} provider`);
          if (semaphores.size > 0 && !provider.semaphore)
            throw new NotImplementedError(`semaphores on the ${provider.backend} provider`);
          const intervalMs = flags.interval;
          const poller = new Poller({
            provider,
            watched: { prefix: flags.prefix, semaphores, elections: flags.election },
            intervalMs,
            deadlineMs: Math.max(2_000, intervalMs * 4),
          });
          const server = await DashboardServer.listen({
            provider,
            poller,
            host: flags.host,
            port: flags.port,
            authToken: token,
            allowForceRelease: flags.allowForceRelease === true,
            operator: operator(),
            assetsDir: assetsDir(),
            backendNote: backendNote(provider.backend, intervalMs),
            intervalMs,
            prefix: flags.prefix,
          }).catch((error: unknown) => {
            throw listenRefused(error, flags.host, flags.port);
          });
          poller.start();
          console.log(
            `fencekit dashboard on ${server.url} (${provider.backend}, every ${intervalMs} ms${
              flags.allowForceRelease ? ', force-release on' : ''
            })${token === undefined ? '' : '; open it as /?token=<the token>'}`,
          );
          await new Promise<void>((resolve) => {
            if (interrupts.signal.aborted) resolve();
            interrupts.signal.addEventListener('abort', () => resolve(), { once: true });
          });
          await Promise.all([server.close(), poller.stop()]);
          return interrupts.received ? exitCodeForSignal(interrupts.received) : EXIT.ok;
        });
      }),
    );
}

/** The page's files: dist/dashboard/ in the package, the assets folder beside this file in the source. */
function assetsDir(): string {
  for (const candidate of ['./dashboard/', './assets/']) {
    const dir = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(`${dir}index.html`)) return dir;
  }
  throw new Error('fencekit dashboard: the page files are missing from this installation');
}

/** A port in use or not ours to take, said as a usage error (exit 64) rather than a stack trace. */
function listenRefused(error: unknown, host: string, port: number): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return new InvalidArgumentError('--port', `${host}:${port} is in use`);
  if (code === 'EACCES')
    return new InvalidArgumentError('--port', `${host}:${port} may not be bound by this user`);
  if (code === 'EADDRNOTAVAIL')
    return new InvalidArgumentError('--host', `${host} is no address of this machine`);
  return error;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535)
    throw new CommanderArgumentError('expected a port, 0..65535');
  return n;
}

/** `name=limit` → [name, limit]. */
function semaphoreSpec(spec: string): [string, number] {
  const at = spec.lastIndexOf('=');
  const name = spec.slice(0, at);
  const limit = Number(spec.slice(at + 1));
  if (at <= 0 || !Number.isInteger(limit) || limit < 1)
    throw new InvalidArgumentError(
      '--semaphore',
      `expected name=limit, e.g. jobs=3 (got ${JSON.stringify(spec)})`,
    );
  validateKey(name, '--semaphore');
  return [name, limit];
}
