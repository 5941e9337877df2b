// Shared by every benchmark: measures latencies and prints them side by side with ratios.

/** Runs fn `iterations` times after `warmup` runs; returns per-call latencies in microseconds. */
export async function measure(fn, { iterations = 2_000, warmup = 200 } = {}) {
  for (let i = 0; i < warmup; i++) await fn();
  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const start = process.hrtime.bigint();
    await fn();
    samples[i] = Number(process.hrtime.bigint() - start) / 1_000;
  }
  samples.sort();
  const at = (q) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
  return { p50: at(0.5), p99: at(0.99), iterations };
}

/**
 * Measures several cases in interleaved rounds (A B C A B C …) so that the machine's slow and fast
 * moments fall on every case alike; each p50/p99 is taken over all rounds' samples.
 * cases: { name: fn }. Returns rows { name, p50, p99, iterations } in the order given.
 */
export async function measureSideBySide(cases, { rounds = 5, iterations = 500, warmup = 200 } = {}) {
  const entries = Object.entries(cases);
  for (const [, fn] of entries) for (let i = 0; i < warmup; i++) await fn();
  const samples = entries.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (const [index, [, fn]] of entries.entries()) {
      for (let i = 0; i < iterations; i++) {
        const start = process.hrtime.bigint();
        await fn();
        samples[index].push(Number(process.hrtime.bigint() - start) / 1_000);
      }
    }
  }
  return entries.map(([name], index) => {
    const sorted = Float64Array.from(samples[index]).sort();
    const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    return { name, p50: at(0.5), p99: at(0.99), iterations: sorted.length };
  });
}

/** Every table printed in this run, in order, for the charts (bench/run.mjs --chart). */
export const printedTables = [];

/** Prints rows { name, p50, p99 } with each p50 as a ratio to the first row's. */
export function printTable(title, rows) {
  printedTables.push({ title, rows });
  const base = rows[0].p50;
  console.log(`\n${title}`);
  console.log(
    `${'case'.padEnd(48)} ${'p50 µs'.padStart(10)} ${'p99 µs'.padStart(10)} ${'× first'.padStart(8)}`,
  );
  for (const row of rows) {
    console.log(
      `${row.name.padEnd(48)} ${row.p50.toFixed(1).padStart(10)} ${row.p99.toFixed(1).padStart(10)} ${(row.p50 / base).toFixed(2).padStart(8)}`,
    );
  }
}

/**
 * Prints rows { name, grants: [per client, per round…], seconds } as handoffs/s and fairness:
 * Jain's index of the per-client grants (1.00 = every client got the same share) and min/max.
 */
export function printContention(title, rows) {
  console.log(`\n${title}`);
  console.log(
    `${'case'.padEnd(48)} ${'grants/s'.padStart(10)} ${'fairness'.padStart(10)} ${'min/max'.padStart(8)}`,
  );
  for (const { name, grants, seconds } of rows) {
    const total = grants.reduce((a, b) => a + b, 0);
    const squares = grants.reduce((a, b) => a + b * b, 0);
    const jain = (total * total) / (grants.length * squares);
    const minMax = Math.min(...grants) / Math.max(...grants);
    console.log(
      `${name.padEnd(48)} ${(total / seconds).toFixed(0).padStart(10)} ${jain.toFixed(3).padStart(10)} ${minMax.toFixed(2).padStart(8)}`,
    );
  }
}
