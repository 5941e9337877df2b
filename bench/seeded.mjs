// A small seeded PRNG (mulberry32): the same seed gives the same draws. The benchmarks resample
// with it (the same rounds give the same interval) and the torture runner draws its schedules and
// workloads with it (the same seed replays the same run); torture/random.ts re-exports it.
export function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
