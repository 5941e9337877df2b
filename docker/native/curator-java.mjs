// Curator from Debian's libcurator-recipes-java (installed by install-servers.sh): where its jars
// are, and compiling a small Java harness against them. Shared by the interop tests and benchmarks.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const CURATOR_JARS = [
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
  const absent = CURATOR_JARS.filter((jar) => !existsSync(jar));
  return absent.length > 0
    ? `missing ${absent.join(', ')}: apt-get install libcurator-recipes-java (docker/native/install-servers.sh)`
    : undefined;
}

/**
 * Compiles one Java source file against Curator into a temp dir. Returns the classpath to run its
 * class with, and remove() for the temp dir.
 */
export async function compileAgainstCurator(sourceFile) {
  const dir = await mkdtemp(join(tmpdir(), 'fencekit-curator-'));
  const classpath = CURATOR_JARS.join(':');
  try {
    await run('javac', ['-nowarn', '-d', dir, '-cp', classpath, sourceFile], { timeout: 120_000 });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    classpath: `${dir}:${classpath}`,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * Compiles `sourceFile` against Curator and starts its class `className` with `args`: each line it
 * prints goes to onLine, and onExit(error) runs once when it exits. close() asks it to quit (a
 * `quit` line), kills it if it has not exited 10 s later, and removes the compiled classes.
 */
export async function startHarness(sourceFile, className, args, { onLine, onExit = () => undefined }) {
  const compiled = await compileAgainstCurator(sourceFile);
  const child = spawn('java', ['-cp', compiled.classpath, className, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let ended;
  const exited = new Promise((resolveExit) => {
    child.once('exit', (code) => {
      ended = new Error(`the Curator harness exited (${code})`);
      onExit(ended);
      resolveExit();
    });
  });
  createInterface({ input: child.stdout }).on('line', onLine);
  return {
    pid: child.pid,
    /** The error the harness's exit gave, once it has exited. */
    get ended() {
      return ended;
    },
    send: (line) => child.stdin.write(`${line}\n`),
    async close() {
      if (!ended) child.stdin.end('quit\n');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      await compiled.remove();
    },
  };
}
