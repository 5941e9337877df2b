/** A small seeded PRNG (mulberry32): the same seed replays the same schedule and workload. */
export { seeded } from '../bench/seeded.mjs';

export function pick<T>(random: () => number, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

export const between = (random: () => number, min: number, max: number): number =>
  min + Math.floor(random() * (max - min + 1));
