import { spawn } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { eventually } from '../../src/testing/index.js';
import { endpoint, type ServerGroup } from '../servers/index.js';
import { ENSEMBLE_DEADLINE_MS } from '../servers/zk-quorum.js';

/** The servers of a group by pid, which this file can kill and start again (the start script's pid files follow). */
export function controls(group: ServerGroup) {
  const stateDir = endpoint(group, 'STATE_DIR');
  const pids = group.members.map((m) => m.pid);
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const signal = (i: number, sig: NodeJS.Signals) => process.kill(-(pids[i] as number), sig);
  return {
    pause: (i: number) => signal(i, 'SIGSTOP'),
    resume: (i: number) => signal(i, 'SIGCONT'),
    async kill(i: number) {
      signal(i, 'SIGKILL');
      await eventually('the server exited', async () => !alive(pids[i] as number));
    },
    /** Starts member i again with its own config and data, as the start script did. */
    async start(i: number) {
      const member = group.members[i];
      if (!member) throw new Error(`no member ${i}`);
      const log = openSync(`${stateDir}/${member.name}.log`, 'a');
      const child = spawn(
        'java',
        [
          '-Xmx256m',
          '-XX:+UseSerialGC',
          '-Dzookeeper.jmx.log4j.disable=true',
          '-cp',
          '/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar',
          'org.apache.zookeeper.server.quorum.QuorumPeerMain',
          `${stateDir}/${member.name}.cfg`,
        ],
        { detached: true, stdio: ['ignore', log, log] },
      );
      child.unref();
      pids[i] = child.pid as number;
      writeFileSync(`${stateDir}/${member.name}.pid`, String(child.pid)); // stop.sh ends this one too
      try {
        await eventually('the server serves again', () => serving(member.address), ENSEMBLE_DEADLINE_MS);
      } catch (error) {
        // A member that does not come back is rare (seen once in CI): say why, from its own log.
        const tail = readFileSync(`${stateDir}/${member.name}.log`, 'utf8').split('\n').slice(-25).join('\n');
        const state = alive(child.pid as number) ? 'running' : 'exited';
        throw new Error(
          `${member.name} (${member.address}, ${state}) did not serve again; its log ends:\n${tail}`,
          {
            cause: error,
          },
        );
      }
    },
  };
}

/** ZooKeeper's own answer to `srvr`: serving once it names its mode. */
function serving(address: string): Promise<boolean> {
  const [host = '', port = ''] = address.split(':');
  return new Promise((ok) => {
    let text = '';
    const socket = net.connect(Number(port), host, () => socket.end('srvr'));
    socket.setTimeout(1_000, () => socket.destroy());
    socket.on('data', (d) => {
      text += d;
    });
    socket.on('close', () => ok(/Mode: (standalone|leader|follower)/.test(text)));
    socket.on('error', () => ok(false));
  });
}
