import { hostname, userInfo } from 'node:os';
import { InvalidArgumentError as CommanderArgumentError, Option } from 'commander';
import { connect } from '../connect.js';
import { InvalidArgumentError } from '../errors.js';
import type { LockProvider } from '../types.js';
import { urlCredentials } from '../url-display.js';

/** `--url`, or FENCEKIT_URL when it is absent. */
export const urlOption = () =>
  new Option('--url <url>', 'backend URL, e.g. etcd://127.0.0.1:2379').env('FENCEKIT_URL');

/** How long a command may take to end after SIGTERM before SIGKILL (`--grace`). */
export const DEFAULT_GRACE_MS = 10_000;

export const milliseconds = (value: string): number => {
  const ms = Number(value);
  if (value.trim() === '' || !Number.isFinite(ms) || ms < 0)
    throw new CommanderArgumentError('expected a number of milliseconds');
  return ms;
};

export const positiveInteger = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new CommanderArgumentError('expected a positive integer');
  return n;
};

/** Who this process is, for owner texts: `<host>/<pid>`. */
export const defaultOwner = (): string => `${hostname()}/${process.pid}`;

/** Who runs an operator command, for the audit trail of force-release. */
export function operator(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // no passwd entry (a container's arbitrary uid): the host alone still says where it came from
  }
  return `${user}@${hostname()}`;
}

/** Opens the backend the URL names, runs body, and closes it whatever happens. */
export async function withProvider<T>(
  url: string | undefined,
  body: (provider: LockProvider) => Promise<T>,
): Promise<T> {
  if (!url) throw new InvalidArgumentError('--url', 'missing: pass --url or set FENCEKIT_URL');
  const provider = await connect(url);
  try {
    return await body(provider);
  } finally {
    await provider.close();
  }
}

/**
 * Every message printed passes here: besides what displayUrl() keeps out of messages, any
 * `scheme://user:password@` text and every form of the given URLs' passwords are masked.
 */
export function redactSecrets(text: string, urls: ReadonlyArray<string | undefined>): string {
  let out = text.replace(/([a-z][a-z0-9+.-]*:\/\/[^:@/\s]*:)[^@/\s]*@/gi, '$1***@');
  for (const url of urls)
    for (const secret of url ? urlCredentials(url) : []) out = out.split(secret).join('***');
  return out;
}

/** The URLs this process was given (--url, FENCEKIT_URL), whose passwords must never be printed. */
export function givenUrls(argv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const urls = env.FENCEKIT_URL ? [env.FENCEKIT_URL] : [];
  argv.forEach((arg, i) => {
    if (arg === '--url' && argv[i + 1] !== undefined) urls.push(argv[i + 1] as string);
    else if (arg.startsWith('--url=')) urls.push(arg.slice('--url='.length));
  });
  return urls;
}
