import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The tarball as npm would publish it, packed from the dist that npm test built: checked by publint
// and attw, then unpacked into a consumer (test/package/fixtures/consumer) that type-checks under
// each moduleResolution and loads every entry point in ESM and CJS. No network: the consumer's
// dependencies are linked from this repository's node_modules.
const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const fixture = join(root, 'test/package/fixtures/consumer');
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string;
  exports: Record<string, unknown>;
  typesVersions: Record<string, Record<string, string[]>>;
  bin: Record<string, string>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};
/** What a TypeScript user of each backend installs besides the packages themselves. */
const typePackages = ['@types/node', '@types/pg'];
const resolutions = ['node10-cjs', 'node10-esm', 'node16', 'nodenext', 'bundler'];
const slow = 120_000; // each step is one process; generous for a loaded machine

/** A checking tool from devDependencies. */
function devTool(name: string): string {
  const path = join(root, 'node_modules/.bin', name);
  if (!existsSync(path))
    throw new Error(`${name} is missing from node_modules: it is a devDependency (npm ci)`);
  return path;
}

/** Runs a command; a failure shows its output, not only its exit code. */
async function succeeds(file: string, args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await run(file, args, { cwd, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`${[file, ...args].join(' ')} failed:\n${stdout}\n${stderr}`);
  }
}

/** Every file path named in an exports map. */
function exportTargets(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  return Object.values(value as Record<string, unknown>).flatMap(exportTargets);
}

const inPackage = (path: string) => path.replace(/^\.\//, '');

describe('the packed tarball', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'fencekit-tarball-'));
  const consumer = join(scratch, 'consumer');
  let tarball = '';
  let files: string[] = [];

  beforeAll(async () => {
    // --ignore-scripts: prepack would build again what npm test has just built.
    const packed = await succeeds(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch],
      root,
    );
    const [summary] = JSON.parse(packed) as Array<{ filename: string; files: Array<{ path: string }> }>;
    if (!summary) throw new Error('npm pack described no tarball');
    tarball = join(scratch, summary.filename);
    files = summary.files.map((file) => file.path);

    cpSync(fixture, consumer, { recursive: true });
    const modules = join(consumer, 'node_modules');
    mkdirSync(modules);
    await succeeds('tar', ['-xzf', tarball, '-C', modules], scratch);
    renameSync(join(modules, 'package'), join(modules, 'fencekit'));
    const linked = [
      ...Object.keys(manifest.dependencies),
      ...Object.keys(manifest.peerDependencies),
      ...typePackages,
    ];
    for (const name of linked) {
      mkdirSync(dirname(join(modules, name)), { recursive: true }); // a scoped name has a folder
      symlinkSync(join(root, 'node_modules', name), join(modules, name));
    }
  }, slow);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('holds what the manifest points at, README, LICENSE and CHANGELOG, and nothing else', () => {
    const pointedAt = [
      ...exportTargets(manifest.exports),
      ...Object.values(manifest.typesVersions).flatMap((paths) => Object.values(paths).flat()),
      ...Object.values(manifest.bin),
    ].map(inPackage);
    expect(pointedAt.filter((path) => !files.includes(path))).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md']));
    const outsideDist = files.filter((path) => !path.startsWith('dist/'));
    expect(outsideDist.sort()).toEqual(['CHANGELOG.md', 'LICENSE', 'README.md', 'package.json']);
    // The CLI runs as ESM only (bin): its CJS build and declarations stay out.
    expect(files.filter((path) => path.startsWith('dist/cli.')).sort()).toEqual([
      'dist/cli.js',
      'dist/cli.js.map',
    ]);
  });

  it("holds the dashboard's page, script and stylesheet, which `fencekit dashboard` serves", () => {
    expect(files.filter((path) => path.startsWith('dist/dashboard/')).sort()).toEqual([
      'dist/dashboard/dashboard.css',
      'dist/dashboard/dashboard.js',
      'dist/dashboard/index.html',
    ]);
  });

  it(
    'publint reports no error or warning',
    async () => {
      await succeeds(devTool('publint'), ['run', tarball, '--strict'], scratch);
    },
    slow,
  );

  it(
    'attw finds no problem in any entry point under node10, node16 (ESM and CJS) and bundler',
    async () => {
      await succeeds(devTool('attw'), [tarball, '--format', 'ascii', '--no-color'], scratch);
    },
    slow,
  );

  it.each(resolutions)(
    'a strict consumer type-checks under %s',
    async (resolution) => {
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      await succeeds(process.execPath, [tsc, '-p', `tsconfig.${resolution}.json`], consumer);
    },
    slow,
  );

  it(
    'loads every entry point in ESM and CJS with the same exports; the facades work in both',
    async () => {
      const esm = JSON.parse(await succeeds(process.execPath, ['smoke.mjs'], consumer));
      const cjs = JSON.parse(await succeeds(process.execPath, ['smoke.cjs'], consumer));
      const entryPoints = JSON.parse(readFileSync(join(fixture, 'entry-points.json'), 'utf8')) as string[];
      const subpaths = Object.keys(manifest.exports).filter((path) => path !== './package.json');
      expect(entryPoints.map((name) => name.replace(/^fencekit/, '.'))).toEqual(subpaths);
      expect(Object.keys(esm.exportNames)).toEqual(entryPoints);
      expect(cjs.exportNames).toEqual(esm.exportNames);
      expect(esm.redlock).toEqual({ defaultIsNamed: true, lockIsLock: true, released: true });
      expect(cjs.redlock).toEqual({
        isClass: true,
        defaultIsClass: true,
        namedIsClass: true,
        lockIsLock: true,
        released: true,
      });
      const scope = [{ name: 'fencekit', version: manifest.version }];
      expect(esm.scopes).toEqual(scope);
      expect(cjs.scopes).toEqual(scope);
    },
    slow,
  );

  it(
    'fencekit --version prints the package version',
    async () => {
      const cli = join(consumer, 'node_modules/fencekit', manifest.bin.fencekit ?? '');
      for (const flag of ['--version', '-V']) {
        expect((await succeeds(process.execPath, [cli, flag], consumer)).trim()).toBe(manifest.version);
      }
    },
    slow,
  );
});
