import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import type { ServerGroup, ServerKind, ServerMember } from './types.js';

const run = promisify(execFile);
const scripts = resolve(import.meta.dirname, '../../docker/native');
const SCRIPT: Record<ServerKind, string> = {
  etcd: 'etcd.sh',
  zookeeper: 'zookeeper.sh',
  redis: 'redis.sh',
  postgres: 'postgres.sh',
};

/** Parses the KEY=value lines the start scripts print. */
function parseOutput(stdout: string): Map<string, string> {
  const vars = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) vars.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return vars;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitForExit(pid: number, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (isAlive(pid)) {
    if (performance.now() > deadline) throw new Error(`process ${pid} did not exit within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Starts servers with docker/native/<kind>.sh (Debian packages, free loopback ports, a temporary
 * state directory) and stops exactly what it started with stop.sh.
 */
export async function startNative(
  kind: ServerKind,
  args: string[] = [],
  /** Extra variables for the start script (e.g. ZK_PEER_VIEW, see zookeeper.sh). */
  env: Record<string, string> = {},
): Promise<ServerGroup> {
  const started = performance.now();
  const { stdout } = await run('bash', [resolve(scripts, SCRIPT[kind]), ...args], {
    timeout: 120_000,
    env: { ...process.env, ...env },
  });
  const vars = parseOutput(stdout);
  const stateDir = vars.get('STATE_DIR');
  if (!stateDir) throw new Error(`${kind} start script printed no STATE_DIR:\n${stdout}`);
  const members: ServerMember[] = [];
  for (const [key, value] of vars) {
    if (!/^(MEMBER|NODE|INSTANCE|SERVER)_\d+$/.test(key)) continue;
    const [name = '', address = '', pidText = ''] = value.split(' ');
    const pid = Number(pidText);
    members.push({
      name,
      address,
      pid,
      kill: async (signal: NodeJS.Signals = 'SIGKILL') => {
        // The start script gave each server its own process group: end the group, wait for the leader.
        try {
          process.kill(-pid, signal);
        } catch {
          if (isAlive(pid)) process.kill(pid, signal);
        }
        await waitForExit(pid);
      },
      pause: async () => void process.kill(-pid, 'SIGSTOP'),
      resume: async () => void process.kill(-pid, 'SIGCONT'),
    });
  }
  let stopped: Promise<void> | undefined;
  return {
    kind,
    origin: 'native',
    vars,
    members,
    startMs: performance.now() - started,
    stop: () => {
      stopped ??= (async () => {
        for (const member of members) {
          try {
            process.kill(-member.pid, 'SIGCONT'); // a paused server cannot die of SIGKILL before it runs again
          } catch {}
        }
        await run('bash', [resolve(scripts, 'stop.sh'), stateDir], { timeout: 60_000 });
      })();
      return stopped;
    },
  };
}

/**
 * Kills a native PostgreSQL server (its whole process group, as a crash), keeps it down downMs,
 * and starts it again on its data and port (docker/native/postgres-restart.sh); resolves once it
 * answers. Sessions and locks are gone; committed rows stay (ask for durableCommits).
 */
export async function restartPostgres(group: ServerGroup, downMs: number): Promise<void> {
  const stateDir = group.vars.get('STATE_DIR');
  if (group.kind !== 'postgres' || group.origin !== 'native' || !stateDir)
    throw new Error('restartPostgres: a native PostgreSQL server is needed');
  await run('bash', [resolve(scripts, 'postgres-restart.sh'), stateDir, String(downMs)], { timeout: 60_000 });
}
