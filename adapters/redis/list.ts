import type { Redis } from 'ioredis';

/** SCAN rounds per node at most (×COUNT keys looked at): list() is bounded however large the keyspace. */
const MAX_SCAN_ROUNDS = 10_000;
const SCAN_COUNT = 1_000;
const LOCK_SUFFIX = '}:lock';

/** A glob pattern that matches `text` literally. */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * The names whose lock key exists (a lock key lives exactly as long as its grant) under `namePrefix`,
 * from `<keyPrefix>{<name>}:lock` keys found by SCAN on each node. Each round is one call with the
 * provider's deadline; the rounds are bounded.
 */
export async function heldNamesScan(
  nodes: Redis[],
  keyPrefix: string,
  namePrefix: string,
  call: <T>(what: string, run: () => Promise<T>) => Promise<T>,
): Promise<string[]> {
  // A name that starts with '}' is stored after a space (see lockKeys): match those through '{*'.
  const literal = namePrefix.startsWith('}') ? '' : namePrefix;
  const pattern = `${globLiteral(`${keyPrefix}{${literal}`)}*${globLiteral(LOCK_SUFFIX)}`;
  const names: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    for (let round = 0; round < MAX_SCAN_ROUNDS; round++) {
      const [next, keys] = (await call('list', () =>
        node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT),
      )) as [string, string[]];
      for (const key of keys) {
        const tagged = key.slice(keyPrefix.length + 1, -LOCK_SUFFIX.length);
        names.push(tagged.startsWith(' }') ? tagged.slice(1) : tagged);
      }
      cursor = next;
      if (cursor === '0') break;
    }
  }
  return names;
}
