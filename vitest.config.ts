import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Two files at once: most of a test's time is spent waiting for servers, not computing.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The JSON report is what .ci/run counts ("N passed, N failed").
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }]],
  },
});
