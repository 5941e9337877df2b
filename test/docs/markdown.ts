/**
 * Reads the user docs (README.md and docs/*.md) the way the docs checks need them: fenced code
 * blocks with their markers, relative links, and the anchors GitHub gives each heading.
 *
 * A code block's marker is an HTML comment on the line just before its fence:
 * `<!-- runnable -->` runs the block against the memory provider, `<!-- fragment -->` leaves a
 * deliberate fragment out of the compile. Every other ```ts block is compiled.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export type SnippetMarker = 'compile' | 'runnable' | 'fragment';

export interface CodeBlock {
  /** The file, relative to the repository root. */
  file: string;
  /** 1-based line of the first line of code (the line after the opening fence). */
  line: number;
  lang: string;
  code: string;
  marker: SnippetMarker;
}

export interface MarkdownLink {
  file: string;
  line: number;
  target: string;
}

export interface MarkdownDoc {
  file: string;
  text: string;
  blocks: CodeBlock[];
  links: MarkdownLink[];
  anchors: Set<string>;
}

const TS_LANGS = new Set(['ts', 'typescript']);
const MARKERS: Record<string, SnippetMarker> = {
  '<!-- runnable -->': 'runnable',
  '<!-- fragment -->': 'fragment',
};

/** README.md and every .md under docs/, relative to root. */
export function userDocFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => join('docs', name));
  return ['README.md', ...docs.sort()];
}

export function readDoc(root: string, file: string): MarkdownDoc {
  const text = readFileSync(join(root, file), 'utf8');
  const lines = text.split('\n');
  const blocks: CodeBlock[] = [];
  const links: MarkdownLink[] = [];
  const slugs = new GithubSlugs();
  let fence: { lang: string; start: number; marker: SnippetMarker; body: string[] } | null = null;
  lines.forEach((line, index) => {
    const opening = /^\s*```+\s*([\w-]*)/.exec(line);
    if (fence) {
      if (/^\s*```+\s*$/.test(line)) {
        blocks.push({
          file,
          line: fence.start,
          lang: fence.lang,
          code: fence.body.join('\n'),
          marker: fence.marker,
        });
        fence = null;
      } else {
        fence.body.push(line);
      }
      return;
    }
    if (opening) {
      const previous = (lines[index - 1] ?? '').trim();
      fence = { lang: opening[1] ?? '', start: index + 2, marker: MARKERS[previous] ?? 'compile', body: [] };
      return;
    }
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    if (heading?.[1]) slugs.add(heading[1]);
    for (const target of linkTargets(line)) links.push({ file, line: index + 1, target });
  });
  return { file, text, blocks, links, anchors: slugs.all };
}

export function isTypeScript(block: CodeBlock): boolean {
  return TS_LANGS.has(block.lang);
}

/** Link targets on one line of prose, inline code left out (`[a](b)` inside backticks is text). */
function linkTargets(line: string): string[] {
  const prose = line.replace(/`[^`]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => match[1] ?? '');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to '-', repeats numbered. */
class GithubSlugs {
  readonly all = new Set<string>();
  readonly #seen = new Map<string, number>();

  add(heading: string): void {
    const text = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/[`*]/g, '')
      .trim()
      .toLowerCase();
    const base = text.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const count = this.#seen.get(base) ?? 0;
    this.#seen.set(base, count + 1);
    this.all.add(count === 0 ? base : `${base}-${count}`);
  }
}
