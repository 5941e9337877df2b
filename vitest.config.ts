import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/longest-first.js';

const { version } = JSON.parse(readFileSync(new URL('package.json', import.meta.url), 'utf8')) as {
  version: string;
};

export default defineConfig({
  // As the build does (tsup.config.ts): tests from source see the package's version.
  define: { __FENCEKIT_VERSION__: JSON.stringify(version) },
  test: {
    include: ['test/**/*.test.ts'],
    // The torture runner the test/torture files drive, built once for all of them.
    globalSetup: ['test/torture/global-setup.ts'],
    // Four files at once on two cores: most of a test's time is spent waiting for servers and
    // timers (with three, the cores were 40-80 % idle for the second half of the run), and the
    // tests wait for events, not times (see docs/testing.md).
    maxWorkers: 4,
    sequence: { sequencer: LongestFirst },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The JSON report is what .ci/run counts ("N passed, N failed").
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }]],
  },
});
