import { givenUrls, redactSecrets } from './options.js';

const urls = givenUrls(process.argv, process.env);

/** Writes to stderr with every URL password redacted: the one way the CLI reports a problem. */
export function printError(text: string): void {
  process.stderr.write(redactSecrets(text, urls));
}

/** One line `fencekit: …` on stderr. */
export function warn(message: string): void {
  printError(`fencekit: ${message}\n`);
}
