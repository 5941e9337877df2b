// Writes test/durations.json from the last run's JSON report (reports/vitest.json): each test
// file's time in whole seconds, which the test sequencer (test/longest-first.ts) starts longest
// first. Run after a full `vitest run` when files were added or got much slower or faster.
import { readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';

// The report names files by absolute path: taken relative to the checkout that ran it.
const root = (name) => name.slice(0, name.lastIndexOf('/test/') + 1);

const report = JSON.parse(readFileSync('reports/vitest.json', 'utf8'));
const seconds = Object.fromEntries(
  report.testResults
    .map((file) => [relative(root(file.name), file.name), Math.round((file.endTime - file.startTime) / 1000)])
    .sort(([a], [b]) => (a < b ? -1 : 1)),
);
writeFileSync('test/durations.json', `${JSON.stringify(seconds, null, 2)}\n`);
console.log(`test/durations.json: ${Object.keys(seconds).length} files`);
