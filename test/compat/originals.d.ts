// The original libraries the facade is checked against: redlock 4 ships no types, and the types of
// redlock 5.0.0-beta.2 are outside its package.json "exports" (the test types what it uses).
declare module 'redlock';
declare module 'redlock5';
// cluster-key-slot (an ioredis dependency) ships no types: the test computes a key's slot with it.
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string): number;
}
