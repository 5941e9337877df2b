// Types of seeded.mjs, for the TypeScript code that draws with it (torture/random.ts).
/** A generator of numbers in [0, 1): the same seed gives the same sequence. */
export function seeded(seed: number): () => number;
