import { hostname, userInfo } from 'node:os';
import { InvalidArgumentError as CommanderArgumentError } from 'commander';

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

/** The URLs this process was given (--url, FENCEKIT_URL), whose passwords must never be printed. */
export function givenUrls(argv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const urls = env.FENCEKIT_URL ? [env.FENCEKIT_URL] : [];
  argv.forEach((arg, i) => {
    if (arg === '--url' && argv[i + 1] !== undefined) urls.push(argv[i + 1] as string);
    else if (arg.startsWith('--url=')) urls.push(arg.slice('--url='.length));
  });
  return urls;
}
