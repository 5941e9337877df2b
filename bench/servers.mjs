// Starts a throwaway server for a benchmark with docker/native (or uses the FENCEKIT_* env endpoints).
import { execFile, execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const scripts = resolve(import.meta.dirname, '../docker/native');
const started = new Set();

// The servers run in their own process groups: stop them even when the benchmark is interrupted
// (Ctrl-C, or a closed pipe when its output goes to `head`).
const stopAllNow = () => {
  for (const dir of started) execFileSync('bash', [resolve(scripts, 'stop.sh'), dir], { stdio: 'ignore' });
  started.clear();
};
for (const signal of ['SIGINT', 'SIGTERM', 'SIGPIPE', 'SIGHUP']) {
  process.on(signal, () => {
    stopAllNow();
    process.exit(130);
  });
}
process.stdout.on('error', () => {
  stopAllNow();
  process.exit(0);
});

export async function startServer(script, args = [], envName) {
  if (envName && process.env[envName])
    return { vars: new Map([['URL', process.env[envName]]]), started: false, stop: async () => {} };
  const { stdout } = await run('bash', [resolve(scripts, script), ...args], { timeout: 120_000 });
  const vars = new Map(
    stdout
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  const dir = vars.get('STATE_DIR');
  started.add(dir);
  return {
    vars,
    started: true, // ours: a benchmark may pin it to a CPU (bench/pin.mjs); a server given by URL is left alone
    stop: async () => {
      started.delete(dir);
      await run('bash', [resolve(scripts, 'stop.sh'), dir]);
    },
  };
}
