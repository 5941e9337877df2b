import { constants } from 'node:os';
import { CommanderError } from 'commander';
import { FencekitError } from '../errors.js';

/** sysexits(3) codes, the same for every command (docs/operations.md, "Command line"). */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 64,
  unavailable: 69,
  /** The backend refused the credentials or a certificate (sysexits' EX_NOPERM). */
  authFailed: 77,
  timeout: 75,
  /** The command's session outlived SIGKILL: the CLI waited for it and left without releasing. */
  groupNotEmptied: 71,
  commandNotFound: 127,
  commandNotExecutable: 126,
} as const;

const BY_ERROR_CODE: Partial<Record<string, number>> = {
  INVALID_ARGUMENT: EXIT.usage,
  SEMAPHORE_LIMIT_MISMATCH: EXIT.usage,
  BACKEND_UNAVAILABLE: EXIT.unavailable,
  AUTH_FAILED: EXIT.authFailed,
  NOT_IMPLEMENTED: EXIT.unavailable,
  PROVIDER_CLOSED: EXIT.unavailable,
  LOCK_TIMEOUT: EXIT.timeout,
};

/** The exit code for an error that ended a command. */
export function exitCodeFor(error: unknown): number {
  if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (error instanceof FencekitError) return BY_ERROR_CODE[error.code] ?? EXIT.failure;
  return EXIT.failure;
}

/** 128 + n for a process ended by signal n, as shells report it. */
export function exitCodeForSignal(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}
