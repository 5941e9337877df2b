import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Starts the test files that took longest last time first (test/durations.json, written by
 * scripts/test-durations.mjs), so that a long file does not start last and run alone at the end.
 * A clean clone has no vitest cache to sort by, which is when CI runs. A file not listed yet
 * counts as a middling one.
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = JSON.parse(readFileSync(new URL('durations.json', import.meta.url), 'utf8')) as Record<
      string,
      number
    >;
    const root = this.ctx.config.root;
    const known = Object.values(seconds).sort((a, b) => a - b);
    const middling = known[Math.floor(known.length / 2)] ?? 0;
    const took = (file: TestSpecification) => seconds[relative(root, file.moduleId)] ?? middling;
    return [...files].sort((a, b) => took(b) - took(a));
  }
}
