// Drives bench/curator/CuratorBench.java (Curator's InterProcessMutex, Debian's libcurator-recipes-java):
// compiles it with javac into a temp dir, starts it against a connect string, and sends it one
// command at a time, so the ZooKeeper benchmark can interleave Curator's rounds with fencekit's.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { compileAgainstCurator, curatorMissing } from '../docker/native/curator-java.mjs';

export { curatorMissing };

/** Starts the harness; returns { send(command) → parsed JSON reply, close() }. */
export async function startCurator(connectString) {
  const compiled = await compileAgainstCurator(resolve(import.meta.dirname, 'curator/CuratorBench.java'));
  const child = spawn('java', ['-cp', compiled.classpath, 'CuratorBench', connectString], {
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
      await compiled.remove();
    },
  };
}
