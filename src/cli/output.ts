import { processSecrets } from '../secret-mask.js';
import { urlCredentials } from '../url-display.js';
import { givenUrls } from './options.js';

// The passwords of the URLs this process was given are masked before any connect() remembers them.
processSecrets.add(givenUrls(process.argv, process.env).flatMap(urlCredentials));
// So is the password given apart from the URL (--password-file's is added once read).
if (process.env.FENCEKIT_PASSWORD) processSecrets.add([process.env.FENCEKIT_PASSWORD]);

/**
 * Writes to stderr with every credential masked (URL passwords, and those the process was given),
 * by the rule every error and event follows: the one way the CLI reports a problem.
 */
export function printError(text: string): void {
  process.stderr.write(processSecrets.text(text));
}

/** One line `fencekit: …` on stderr. */
export function warn(message: string): void {
  printError(`fencekit: ${message}\n`);
}
