// Drives bench/curator/CuratorBench.java (Curator's InterProcessMutex, Debian's libcurator-recipes-java):
// compiles it with javac into a temp dir, starts it against a connect string, and sends it one
// command at a time, so the ZooKeeper benchmark can interleave Curator's rounds with fencekit's.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { curatorMissing, startHarness } from '../docker/native/curator-java.mjs';

export { curatorMissing };

/** Starts the harness; returns { send(command) → parsed JSON reply, close() }. */
export async function startCurator(connectString) {
  const waiting = [];
  const harness = await startHarness(
    resolve(import.meta.dirname, 'curator/CuratorBench.java'),
    'CuratorBench',
    [connectString],
    {
      onLine: (line) => waiting.shift()?.resolve(JSON.parse(line)),
      onExit: (ended) => {
        for (const w of waiting.splice(0)) w.reject(ended);
      },
    },
  );
  return {
    /** CPU time (µs) the harness's JVM has used so far, from /proc (clock ticks of 10 ms). */
    async cpuMicros() {
      const fields = (await readFile(`/proc/${harness.pid}/stat`, 'utf8')).split(') ')[1].split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10_000; // utime + stime
    },
    send(command) {
      if (harness.ended) return Promise.reject(harness.ended);
      return new Promise((resolveReply, reject) => {
        waiting.push({ resolve: resolveReply, reject });
        harness.send(command);
      });
    },
    close: () => harness.close(),
  };
}
