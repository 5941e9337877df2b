// docs/api.md lists every export of every entry point, one line each, and nothing else: the page
// is read against the entry points' real exports (package.json "exports" → tsup's entry files), so
// a name added to or removed from an entry point without the page fails here.

import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, unknown>;
};

/** Each entry point's source file, as tsup.config.ts names it. */
function entrySources(): Map<string, string> {
  const config = readFileSync(join(root, 'tsup.config.ts'), 'utf8');
  const sources = new Map<string, string>();
  for (const subpath of Object.keys(manifest.exports)) {
    if (subpath === './package.json') continue;
    const entry = subpath === '.' ? 'index' : subpath.slice(2);
    const found = new RegExp(`['"]?${entry.replace(/[/+]/g, '\\$&')}['"]?: '([^']+)'`).exec(config);
    if (!found?.[1]) throw new Error(`tsup.config.ts has no entry for ${subpath}`);
    sources.set(subpath === '.' ? 'fencekit' : `fencekit/${entry}`, join(root, found[1]));
  }
  return sources;
}

/** The names each entry point exports, values and types. */
function exportedNames(sources: Map<string, string>): Map<string, string[]> {
  const program = ts.createProgram([...sources.values()], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: ['node'],
    skipLibCheck: true,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const names = new Map<string, string[]>();
  for (const [entry, file] of sources) {
    const source = program.getSourceFile(file);
    const module = source && checker.getSymbolAtLocation(source);
    if (!module) throw new Error(`cannot read the exports of ${file}`);
    names.set(
      entry,
      checker
        .getExportsOfModule(module)
        .map((symbol) => symbol.name)
        .sort(),
    );
  }
  return names;
}

/**
 * The names docs/api.md lists, by entry point: a table under "## `entry`" lists that entry's exports
 * in its first column; a table with an "entry point" column names the entry on each row.
 */
function listedNames(page: string): Map<string, string[]> {
  const listed = new Map<string, string[]>();
  let section: string | undefined;
  let header: string[] = [];
  for (const line of page.split('\n')) {
    const heading = /^## `([^`]+)`/.exec(line);
    if (line.startsWith('## ')) section = heading?.[1];
    if (!line.startsWith('|')) {
      header = [];
      continue;
    }
    const cells = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.trim());
    if (header.length === 0) {
      header = cells;
      continue;
    }
    if (cells.every((cell) => /^-+$/.test(cell))) continue;
    const exportColumn = header.indexOf('export');
    if (exportColumn < 0) continue; // the table of entry points
    const entryColumn = header.indexOf('entry point');
    const entry = entryColumn < 0 ? section : cells[entryColumn]?.replaceAll('`', '');
    if (!entry) throw new Error(`docs/api.md: a row outside an entry point's section: ${line}`);
    const names = [...(cells[exportColumn] ?? '').matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? '');
    listed.set(entry, [...(listed.get(entry) ?? []), ...names]);
  }
  for (const [entry, names] of listed) listed.set(entry, names.sort());
  return listed;
}

describe('docs/api.md', () => {
  it('lists exactly the exports of every entry point', () => {
    const actual = exportedNames(entrySources());
    const listed = listedNames(readFileSync(join(root, 'docs/api.md'), 'utf8'));
    expect(Object.fromEntries(listed)).toEqual(Object.fromEntries(actual));
  }, 60_000);
});
