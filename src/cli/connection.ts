/**
 * What a command connects to: the URL (`--url` / FENCEKIT_URL) with the TLS files (`--ca`,
 * `--cert`, `--key` / FENCEKIT_CA, FENCEKIT_CERT, FENCEKIT_KEY) and the credentials (`--user`, the
 * password from FENCEKIT_PASSWORD or `--password-file`) that the flags add to it. A password is never
 * a flag: a command line is visible to every user of the machine (`ps`).
 */
import { readFile } from 'node:fs/promises';
import { type Command, Option } from 'commander';
import { connect } from '../connect.js';
import type { ConnectOptions } from '../connect-options.js';
import { parseConnectionUrl } from '../connection-url.js';
import { InvalidArgumentError } from '../errors.js';
import { processSecrets } from '../secret-mask.js';
import type { TlsOptions } from '../tls.js';
import type { LockProvider } from '../types.js';
import { cliAction } from './action.js';
import type { Interrupts } from './interrupts.js';

/** The connection flags of a command, as commander hands them over. */
export interface ConnectionFlags {
  url?: string;
  ca?: string;
  cert?: string;
  key?: string;
  user?: string;
  passwordFile?: string;
}

/** Adds `--url`, the TLS files and the credentials to a command. */
export function connectionOptions(command: Command): Command {
  return command
    .addOption(new Option('--url <url>', 'backend URL, e.g. etcd://127.0.0.1:2379').env('FENCEKIT_URL'))
    .addOption(
      new Option(
        '--ca <file>',
        "certificate authority (PEM) the server's certificate must chain to; TLS",
      ).env('FENCEKIT_CA'),
    )
    .addOption(new Option('--cert <file>', 'client certificate (PEM), with --key; TLS').env('FENCEKIT_CERT'))
    .addOption(new Option('--key <file>', "the client certificate's private key (PEM)").env('FENCEKIT_KEY'))
    .addOption(
      new Option('--user <name>', 'user name; the password comes from FENCEKIT_PASSWORD').env(
        'FENCEKIT_USER',
      ),
    )
    .addOption(
      new Option('--password-file <file>', 'read the password from this file instead').env(
        'FENCEKIT_PASSWORD_FILE',
      ),
    );
}

/** Opens the backend the flags name, runs body, and closes it whatever happens. */
export async function withProvider<T>(
  flags: ConnectionFlags,
  body: (provider: LockProvider) => Promise<T>,
): Promise<T> {
  const { url, options } = await connectionFrom(flags, process.env);
  const provider = await connect(url, options);
  try {
    return await body(provider);
  } finally {
    await provider.close();
  }
}

/**
 * The action of a command that connects (see cliAction): `run` gets the open provider, closed after
 * whatever happens, with the command's argument, its flags and the interrupts, and answers the exit
 * code.
 */
export function providerAction<A, F extends ConnectionFlags>(
  run: (provider: LockProvider, argument: A, flags: F, interrupts: Interrupts) => Promise<number>,
): (argument: A, flags: F) => Promise<void> {
  return cliAction((interrupts: Interrupts, argument: A, flags: F) =>
    withProvider(flags, (provider) => run(provider, argument, flags, interrupts)),
  );
}

/** The URL (with the credentials the flags give) and the TLS option for connect(). */
export async function connectionFrom(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv,
): Promise<{ url: string; options: ConnectOptions }> {
  const { url: named, ...rest } = nonEmpty(flags);
  if (!named) throw new InvalidArgumentError('--url', 'missing: pass --url or set FENCEKIT_URL');
  const password = await givenPassword(rest, env);
  const url = withCredentials(named, rest.user, password);
  const tls = await tlsFiles(rest);
  return { url, options: tls ? { tls } : {} };
}

/** The flags without the empty ones: an exported but empty FENCEKIT_CERT=, say, is no file. */
function nonEmpty(flags: ConnectionFlags): ConnectionFlags {
  return Object.fromEntries(Object.entries(flags).filter(([, value]) => value !== '')) as ConnectionFlags;
}

/** The password from --password-file, else FENCEKIT_PASSWORD; undefined when neither is given. */
async function givenPassword(flags: ConnectionFlags, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  let password = env.FENCEKIT_PASSWORD || undefined;
  if (flags.passwordFile !== undefined) {
    // One line, as `echo secret > file` writes it: the line end is not part of the password.
    password = (await readGiven(flags.passwordFile, '--password-file'))
      .toString('utf8')
      .replace(/\r?\n$/, '');
    if (password === '') throw new InvalidArgumentError('--password-file', 'the file is empty');
  }
  if (password !== undefined) processSecrets.add([password]);
  return password;
}

/** The URL with --user and the password in its user-info; a part given twice is refused. */
function withCredentials(url: string, user: string | undefined, password: string | undefined): string {
  if (user === undefined && password === undefined) return url;
  const spec = parseConnectionUrl(url);
  if (user !== undefined && spec.username)
    throw new InvalidArgumentError('--user', 'the URL names a user already: give it in one place');
  if (password !== undefined && spec.password !== undefined)
    throw new InvalidArgumentError('password', 'the URL has a password already: give it in one place');
  const name = encodeURIComponent(user ?? spec.username ?? '');
  const secret = password ?? spec.password;
  const userinfo = secret === undefined ? name : `${name}:${encodeURIComponent(secret)}`;
  // The old user-info (up to the authority's last '@', as the URL grammar reads it) is replaced.
  return url.trim().replace(/^([a-z][a-z0-9+.-]*:\/\/)(?:[^/?#]*@)?/i, `$1${userinfo}@`);
}

/** The tls option the --ca, --cert and --key files make; undefined when none is given. */
async function tlsFiles(flags: ConnectionFlags): Promise<TlsOptions | undefined> {
  if ((flags.cert === undefined) !== (flags.key === undefined))
    throw new InvalidArgumentError(
      '--cert',
      '--cert and --key go together (a client certificate and its key)',
    );
  if (flags.ca === undefined && flags.cert === undefined) return undefined;
  const tls: TlsOptions = {};
  if (flags.ca !== undefined) tls.ca = await readGiven(flags.ca, '--ca');
  if (flags.cert !== undefined) tls.cert = await readGiven(flags.cert, '--cert');
  if (flags.key !== undefined) tls.key = await readGiven(flags.key, '--key');
  return tls;
}

async function readGiven(path: string, flag: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (error) {
    // The file's name is no secret, but what it holds is: only the reason is said.
    throw new InvalidArgumentError(
      flag,
      `the file cannot be read (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`,
    );
  }
}
