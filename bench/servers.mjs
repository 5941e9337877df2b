// Starts a throwaway server for a benchmark with docker/native (or uses the FENCEKIT_* env endpoints).
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const scripts = resolve(import.meta.dirname, '../docker/native');

export async function startServer(script, args = [], envName) {
  if (envName && process.env[envName])
    return { vars: new Map([['URL', process.env[envName]]]), stop: async () => {} };
  const { stdout } = await run('bash', [resolve(scripts, script), ...args], { timeout: 120_000 });
  const vars = new Map(
    stdout
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  return { vars, stop: () => run('bash', [resolve(scripts, 'stop.sh'), vars.get('STATE_DIR')]) };
}
