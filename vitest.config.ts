import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The JSON report is what .ci/run counts ("N passed, N failed").
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }]],
  },
});
