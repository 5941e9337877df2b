import type { Redis } from 'ioredis';

/** SCAN rounds per node at most (×COUNT keys looked at): list() is bounded however large the keyspace. */
const MAX_SCAN_ROUNDS = 10_000;
const SCAN_COUNT = 1_000;
/** The end of a lock key, which exists exactly while its grant does. */
export const LOCK_HELD_SUFFIX = '}:lock';

/** A glob pattern that matches `text` literally. */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** One list() scan: the nodes to look at, the provider's key prefix and the names' prefix. */
export interface HeldNamesScan {
  nodes: Redis[];
  keyPrefix: string;
  namePrefix: string;
  /** Which keys say a name is held. Default: lock keys. */
  suffixes?: string[];
  call: <T>(what: string, run: () => Promise<T>) => Promise<T>;
}

/**
 * The names under `namePrefix` that have a key `<keyPrefix>{<name>` + one of `suffixes` (keys that
 * exist exactly while their name is held: a lock key, a read-write lock's grants), found by SCAN
 * on each node. Each round is one call with the provider's deadline; the rounds are bounded.
 */
export async function heldNamesScan({
  nodes,
  keyPrefix,
  namePrefix,
  suffixes = [LOCK_HELD_SUFFIX],
  call,
}: HeldNamesScan): Promise<string[]> {
  // A name that starts with '}' is stored after a space (see lockKeys): match those through '{*'.
  const literal = namePrefix.startsWith('}') ? '' : namePrefix;
  const names: string[] = [];
  for (const suffix of suffixes) {
    const pattern = `${globLiteral(`${keyPrefix}{${literal}`)}*${globLiteral(suffix)}`;
    for (const node of nodes) {
      let cursor = '0';
      for (let round = 0; round < MAX_SCAN_ROUNDS; round++) {
        const [next, keys] = (await call('list', () =>
          node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT),
        )) as [string, string[]];
        for (const key of keys) {
          const tagged = key.slice(keyPrefix.length + 1, -suffix.length);
          names.push(tagged.startsWith(' }') ? tagged.slice(1) : tagged);
        }
        cursor = next;
        if (cursor === '0') break;
      }
    }
  }
  return names;
}
