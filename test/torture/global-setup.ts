import { buildTorture } from './runner.js';

/**
 * Builds the torture runner once, before any test file runs: files that each built it (the build
 * cleans its output directory first) removed it under another file's running workload.
 */
export default async function setup(): Promise<void> {
  await buildTorture();
}
