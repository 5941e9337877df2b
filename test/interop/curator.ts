import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { compileAgainstCurator, curatorMissing } from '../../docker/native/curator-java.mjs';

export { curatorMissing };

export interface Curator {
  /** Sends "<verb> <args>" and resolves with the harness's answer ("ok", "granted", …). */
  call(command: string): Promise<string>;
  close(): Promise<void>;
}

/** Compiles CuratorHarness.java into a temp dir and starts it against connectString. */
export async function startCurator(connectString: string): Promise<Curator> {
  const compiled = await compileAgainstCurator(resolve(import.meta.dirname, 'CuratorHarness.java'));
  const child = spawn('java', ['-cp', compiled.classpath, 'CuratorHarness', connectString], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const pending = new Map<string, { resolve: (answer: string) => void; reject: (error: Error) => void }>();
  let ended: Error | undefined;
  const exited = new Promise<void>((resolveExit) => {
    child.once('exit', (code) => {
      ended = new Error(`the Curator harness exited (${code})`);
      for (const waiter of pending.values()) waiter.reject(ended);
      pending.clear();
      resolveExit();
    });
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    const space = line.indexOf(' ');
    const id = line.slice(0, space);
    pending.get(id)?.resolve(line.slice(space + 1));
    pending.delete(id);
  });
  let next = 0;
  return {
    call(command) {
      if (ended) return Promise.reject(ended);
      const id = String(next++);
      return new Promise((resolveAnswer, reject) => {
        pending.set(id, { resolve: resolveAnswer, reject });
        child.stdin.write(`${id} ${command}\n`);
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
