// Drives bench/curator/CuratorBench.java (Curator's InterProcessMutex, Debian's libcurator-recipes-java):
// compiles it with javac into a temp dir, starts it against a connect string, and sends it one
// command at a time, so the ZooKeeper benchmark can interleave Curator's rounds with fencekit's.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

const run = promisify(execFile);
const JARS = [
  'curator-recipes',
  'curator-framework',
  'curator-client',
  'zookeeper',
  'zookeeper-jute',
  'guava',
  'slf4j-api',
  'slf4j-nop',
].map((name) => `/usr/share/java/${name}.jar`);

/** Why Curator cannot run here, or undefined when it can. */
export function curatorMissing() {
  const absent = JARS.filter((jar) => !existsSync(jar));
  if (absent.length > 0) {
    return `${absent.join(', ')} missing: apt-get install libcurator-recipes-java (docker/native/install-servers.sh)`;
  }
  return undefined;
}

/** Starts the harness; returns { send(command) → parsed JSON reply, close() }. */
export async function startCurator(connectString) {
  const dir = await mkdtemp(join(tmpdir(), 'fencekit-curator-'));
  const classpath = JARS.join(':');
  const source = resolve(import.meta.dirname, 'curator/CuratorBench.java');
  await run('javac', ['-nowarn', '-d', dir, '-cp', classpath, source], { timeout: 120_000 });
  const child = spawn('java', ['-cp', `${dir}:${classpath}`, 'CuratorBench', connectString], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const waiting = [];
  let ended;
  const exited = new Promise((resolveExit) => {
    child.once('exit', (code) => {
      ended = new Error(`Curator harness exited (${code})`);
      for (const w of waiting.splice(0)) w.reject(ended);
      resolveExit();
    });
  });
  lines.on('line', (line) => {
    waiting.shift()?.resolve(JSON.parse(line));
  });
  return {
    /** CPU time (µs) the harness's JVM has used so far, from /proc (clock ticks of 10 ms). */
    async cpuMicros() {
      const fields = (await readFile(`/proc/${child.pid}/stat`, 'utf8')).split(') ')[1].split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10_000; // utime + stime
    },
    send(command) {
      if (ended) return Promise.reject(ended);
      return new Promise((resolveReply, reject) => {
        waiting.push({ resolve: resolveReply, reject });
        child.stdin.write(`${command}\n`);
      });
    },
    async close() {
      if (!ended) child.stdin.end('quit\n');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
