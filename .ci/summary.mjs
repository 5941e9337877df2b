// Prints "N passed, N failed[, N skipped]" from a vitest JSON report; fails when no test ran.
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? 'reports/vitest.json';
let report;
try {
  report = JSON.parse(readFileSync(file, 'utf8'));
} catch (error) {
  console.log('0 passed, 0 failed');
  console.error(`summary: no readable test report at ${file}: ${error.message}`);
  process.exit(1);
}
const passed = report.numPassedTests ?? 0;
const failed = report.numFailedTests ?? 0;
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
// A file that failed to load has no test results of its own: count it as one failure.
const brokenFiles = (report.testResults ?? []).filter(
  (r) => r.status === 'failed' && r.assertionResults?.length === 0,
);
const failedTotal = failed + brokenFiles.length;
console.log(`${passed} passed, ${failedTotal} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(passed > 0 && failedTotal === 0 ? 0 : 1);
