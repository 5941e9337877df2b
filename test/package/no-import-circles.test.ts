import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { importCircles, importGraph } from './import-circles.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

// Layers run one way (provider → recipe → session → wire), so no module reaches itself through
// its imports, type-only ones included: a circle means a lower layer knows a higher one.
describe('import circles', () => {
  it('src/ and adapters/ have none', () => {
    const circles = importCircles(importGraph(root, ['src', 'adapters']));
    expect(circles.map((circle) => circle.join(' > '))).toEqual([]);
  });

  describe('the check', () => {
    let project: string | undefined;
    afterEach(() => {
      if (project) rmSync(project, { recursive: true, force: true });
      project = undefined;
    });

    /** A project of `files` (path → source) with a NodeNext tsconfig; returns its circles. */
    const circlesOf = (files: Record<string, string>): string[][] => {
      project = mkdtempSync(join(tmpdir(), 'fencekit-circles-'));
      const options = { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true };
      writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: options }));
      for (const [path, source] of Object.entries(files)) {
        mkdirSync(dirname(join(project, 'lib', path)), { recursive: true });
        writeFileSync(join(project, 'lib', path), source);
      }
      return importCircles(importGraph(project, ['lib']));
    };

    it.each([
      ['import', "import { b } from './b.js';\nexport const a = b;"],
      ['import type', "import type { B } from './b.js';\nexport type A = B;"],
      ['export from', "export { b } from './b.js';"],
      ['export * from', "export * from './b.js';"],
      ['import()', "export const load = () => import('./b.js');"],
      ['an import() type', "export type B = import('./b.js').B;"],
      ['import = require()', "import b = require('./b.js');\nexport const a = b;"],
    ])('sees a circle closed by %s', (_form, source) => {
      const circles = circlesOf({
        'a.ts': source,
        'b.ts': "import type { A } from './a.js';\nexport const b = 1;\nexport type B = A;",
      });
      expect(circles).toEqual([['lib/a.ts', 'lib/b.ts', 'lib/a.ts']]);
    });

    it('shows each circle once, by its shortest path, across folders; a file importing itself counts', () => {
      const circles = circlesOf({
        'low/wire.ts': "import type { Session } from '../mid/session.js';\nexport type Wire = Session;",
        'mid/session.ts': "import type { Wire } from '../low/wire.js';\nexport type Session = Wire;",
        'mid/recipe.ts': "import type { Session } from './session.js';\nexport type Recipe = Session;",
        'top/provider.ts': "import type { Recipe } from '../mid/recipe.js';\nexport type P = Recipe;",
        'self.ts': "export type Self = import('./self.js').Self[];",
      });
      expect(circles.sort()).toEqual([
        ['lib/low/wire.ts', 'lib/mid/session.ts', 'lib/low/wire.ts'],
        ['lib/self.ts', 'lib/self.ts'],
      ]);
    });

    it('passes layers that run one way, and ignores packages and built-ins', () => {
      const circles = circlesOf({
        'wire.ts': "import { setTimeout } from 'node:timers';\nexport const wire = setTimeout;",
        'session.ts':
          "import { wire } from './wire.js';\nimport ts from 'typescript';\nexport const s = [wire, ts];",
        'recipe.ts':
          "import { s } from './session.js';\nimport { wire } from './wire.js';\nexport const r = [s, wire];",
      });
      expect(circles).toEqual([]);
    });
  });
});
