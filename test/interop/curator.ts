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

export interface CuratorHolder {
  /** Every line the holder printed ("granted <session>", "state SUSPENDED" …), with when it came (performance.now()). */
  readonly events: { at: number; line: string }[];
  /** Resolves with the holder's session id (hex) once its InterProcessMutex is granted. */
  readonly granted: Promise<string>;
  release(): void;
  close(): Promise<void>;
}

/** Starts CuratorHolder.java: one Curator client that takes the InterProcessMutex at `path` and reports its connection states. */
export async function startCuratorHolder(
  connectString: string,
  path: string,
  sessionMs: number,
): Promise<CuratorHolder> {
  const compiled = await compileAgainstCurator(resolve(import.meta.dirname, 'CuratorHolder.java'));
  const child = spawn(
    'java',
    ['-cp', compiled.classpath, 'CuratorHolder', connectString, path, String(sessionMs)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const events: { at: number; line: string }[] = [];
  let onGranted: (session: string) => void = () => undefined;
  const granted = new Promise<string>((ok) => {
    onGranted = ok;
  });
  const exited = new Promise<void>((ok) => child.once('exit', () => ok()));
  createInterface({ input: child.stdout }).on('line', (line) => {
    events.push({ at: performance.now(), line });
    if (line.startsWith('granted ')) onGranted(line.slice('granted '.length));
  });
  return {
    events,
    granted,
    release: () => child.stdin.write('release\n'),
    async close() {
      child.stdin.end('quit\n');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      await compiled.remove();
    },
  };
}
