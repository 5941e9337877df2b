import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
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

/** Why Curator cannot run here (Debian's libcurator-recipes-java), or undefined when it can. */
export function curatorMissing(): string | undefined {
  const absent = JARS.filter((jar) => !existsSync(jar));
  return absent.length > 0
    ? `missing ${absent.join(', ')}: apt-get install libcurator-recipes-java`
    : undefined;
}

export interface Curator {
  /** Sends "<verb> <args>" and resolves with the harness's answer ("ok", "granted", …). */
  call(command: string): Promise<string>;
  close(): Promise<void>;
}

/** Compiles CuratorHarness.java into a temp dir and starts it against connectString. */
export async function startCurator(connectString: string): Promise<Curator> {
  const dir = await mkdtemp(join(tmpdir(), 'fencekit-curator-'));
  const classpath = JARS.join(':');
  await run(
    'javac',
    ['-nowarn', '-d', dir, '-cp', classpath, resolve(import.meta.dirname, 'CuratorHarness.java')],
    {
      timeout: 120_000,
    },
  );
  const child = spawn('java', ['-cp', `${dir}:${classpath}`, 'CuratorHarness', connectString], {
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
      await rm(dir, { recursive: true, force: true });
    },
  };
}
