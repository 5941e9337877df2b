import { inspect } from 'node:util';
import { expect } from 'vitest';
import type { FencekitError } from '../../src/index.js';

/** What an operation rejected with (it must reject), and how long that took (ms). */
export async function failure(run: () => Promise<unknown>): Promise<{ error: FencekitError; ms: number }> {
  const started = performance.now();
  const error = await run().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'the operation should have failed').toBeDefined();
  return { error: error as FencekitError, ms: performance.now() - started };
}

/** Nothing the error shows (message, causes, fields) holds the password or a line of the key. */
export function expectNoSecret(error: unknown, secrets: { password: string; key: Buffer }): void {
  const shown = `${String(error)}\n${inspect(error, { depth: 8, showHidden: true })}`;
  expect(shown).not.toContain(secrets.password);
  for (const line of secrets.key.toString().split('\n')) {
    if (line.length > 20 && !line.startsWith('-----')) expect(shown).not.toContain(line);
  }
}
