// The user docs are checked as code: every ```ts block in README.md and docs/ compiles under the
// package's strict tsconfig against the built package (run `npm run build` first), blocks marked
// `<!-- runnable -->` run to completion on the memory provider, relative links resolve inside the
// repository, and no text speaks of issue numbers. Markers are described in markdown.ts.

import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { type CompiledSnippet, compileSnippets } from './compile-snippets.js';
import { isTypeScript, type MarkdownDoc, readDoc, userDocFiles } from './markdown.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);
const RUN_TIMEOUT_MS = 20_000;

const docs: MarkdownDoc[] = userDocFiles(root).map((file) => readDoc(root, file));
const tsBlocks = docs.flatMap((doc) => doc.blocks.filter(isTypeScript));
const compiled = tsBlocks.filter((block) => block.marker !== 'fragment');

describe('documentation snippets', () => {
  let results: CompiledSnippet[] = [];

  beforeAll(() => {
    if (!existsSync(join(root, 'dist', 'index.d.ts'))) throw new Error('run `npm run build` first');
    results = compileSnippets(root, compiled);
  }, 120_000);

  it('finds the documented blocks, and only a few are left out of the compile', () => {
    expect(compiled.length).toBeGreaterThan(20);
    expect(tsBlocks.length - compiled.length).toBeLessThanOrEqual(Math.ceil(tsBlocks.length / 10));
    expect(compiled.filter((block) => block.marker === 'runnable').length).toBeGreaterThanOrEqual(3);
  });

  it('compile under the strict tsconfig against the built package', () => {
    expect(results.flatMap((result) => result.errors)).toEqual([]);
  });

  it('runnable blocks run to completion on the memory provider (a provider left open hangs)', async () => {
    const dir = join(root, '.tmp', 'docs-snippets');
    mkdirSync(dir, { recursive: true });
    const runnable = results.filter((result) => result.javascript !== undefined);
    // Every block marked runnable was emitted, so none is skipped unseen.
    expect(runnable.length).toBe(compiled.filter((block) => block.marker === 'runnable').length);
    const failures = await inTurns(
      2, // two at a time on a 2-core machine, so a slow start does not look like a hang
      runnable.map(({ block, javascript }, index) => async () => {
        if (!javascript?.trim()) return `${block.file}:${block.line}: emitted no JavaScript`;
        // Inside the package's folder, so that 'fencekit' resolves to this package's dist.
        const path = join(dir, `snippet-${index}.mjs`);
        writeFileSync(path, javascript ?? '');
        const env = { ...process.env, LOCK_URL: 'memory://' };
        try {
          await run(process.execPath, [path], { env, timeout: RUN_TIMEOUT_MS, killSignal: 'SIGKILL' });
          return null;
        } catch (error) {
          const { stderr = '', killed = false } = error as { stderr?: string; killed?: boolean };
          const why = killed
            ? `did not end within ${RUN_TIMEOUT_MS} ms`
            : stderr.trim().split('\n').slice(0, 8).join('\n');
          return `${block.file}:${block.line}: ${why}`;
        }
      }),
    );
    expect(failures.filter((failure) => failure !== null)).toEqual([]);
  }, 180_000);
});

describe('documentation links and wording', () => {
  const byFile = new Map(docs.map((doc) => [doc.file, doc]));

  it('relative links point at files inside the repository, and their anchors exist', () => {
    const broken: string[] = [];
    for (const link of docs.flatMap((doc) => doc.links)) {
      if (/^[a-z][a-z+.-]*:/i.test(link.target)) continue; // https:, mailto: — public sites are fine
      const [pathPart = '', anchor] = link.target.split('#');
      const target = pathPart === '' ? join(root, link.file) : resolve(root, dirname(link.file), pathPart);
      const inRepo = relative(root, target);
      const where = `${link.file}:${link.line}: ${link.target}`;
      if (inRepo.startsWith('..')) broken.push(`${where} leaves the repository`);
      else if (!existsSync(target)) broken.push(`${where} does not exist`);
      else if (anchor !== undefined && target.endsWith('.md') && !byFile.get(inRepo)?.anchors.has(anchor)) {
        broken.push(`${where} has no such heading`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('speaks of the library, never of issue numbers or section numbers', () => {
    const patterns = [/\bissues?\s+#?\d+/i, /(^|[\s(])#\d+\b/, /§/, /\bPR\s+#?\d+/];
    const found: string[] = [];
    for (const doc of docs) {
      doc.text.split('\n').forEach((line, index) => {
        if (patterns.some((pattern) => pattern.test(line)))
          found.push(`${doc.file}:${index + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });
});

/** Runs the tasks `width` at a time; their results in the tasks' order. */
async function inTurns<T>(width: number, tasks: Array<() => Promise<T>>): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const lane = async () => {
    while (next < tasks.length) {
      const index = next++;
      results[index] = await (tasks[index] as () => Promise<T>)();
    }
  };
  await Promise.all(Array.from({ length: width }, lane));
  return results;
}
