import { exitCodeForSignal } from './exit-codes.js';
import { Interrupts } from './interrupts.js';

/**
 * A command's action: body resolves with the exit code. SIGINT/SIGTERM/SIGHUP are handled
 * (forwarded to a running command's session, else they stop the waiting) for the whole action; an
 * action stopped by signal n exits 128 + n. Other errors go to the top level, which maps them (exit-codes.ts).
 */
export function cliAction<A extends unknown[]>(
  body: (interrupts: Interrupts, ...args: A) => Promise<number>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const interrupts = new Interrupts();
    try {
      process.exitCode = await body(interrupts, ...args);
    } catch (error) {
      const signal = interrupts.received;
      if (signal === undefined || !interrupts.signal.aborted) throw error;
      process.exitCode = exitCodeForSignal(signal);
    } finally {
      interrupts.dispose();
    }
  };
}
