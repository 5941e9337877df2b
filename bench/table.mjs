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

/** Prints rows { name, p50, p99 } with each p50 as a ratio to the first row's. */
export function printTable(title, rows) {
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
