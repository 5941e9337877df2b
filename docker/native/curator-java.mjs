// Curator from Debian's libcurator-recipes-java (installed by install-servers.sh): where its jars
// are, and compiling a small Java harness against them. Shared by the interop tests and benchmarks.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
