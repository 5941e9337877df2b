import type { Etcd3 } from 'etcd3';
import { prefixEnd } from './keys.js';

/** Keys per range call, and calls at most: list() is bounded however large the keyspace. */
const PAGE = 1_000;
const MAX_PAGES = 1_000;
/** A lock or election key: `<escaped name>/<lease id in hex>`, the name without a '/' of its own. */
const LOCK_KEY = /^([^/]+)\/[0-9a-f]+$/;

/**
 * The names that have keys under `namespace` + the escaped `namePrefix` (a name's first key holds
 * it, so a name with keys is held), read keys-only in pages, each with its own deadline.
 */
export async function heldNamesRange(
  client: Etcd3,
  namespace: string,
  namePrefix: string,
  callTimeoutMs: number,
): Promise<string[]> {
  const given = Buffer.from(namespace + escapeName(namePrefix));
  // An empty start (no namespace, no prefix) is every key: etcd spells that [\0, \0).
  const start = given.length === 0 ? Buffer.from([0]) : given;
  const end = prefixEnd(given);
  const names: string[] = [];
  let from = start;
  for (let page = 0; page < MAX_PAGES; page++) {
    const { kvs, more } = await client.kv.range(
      { key: from, range_end: end, keys_only: true, limit: PAGE },
      { deadline: new Date(Date.now() + callTimeoutMs) },
    );
    for (const { key } of kvs) {
      const match = LOCK_KEY.exec(key.subarray(namespace.length).toString('utf8'));
      if (match) names.push(unescapeName(match[1] as string));
    }
    const last = kvs.at(-1);
    if (!more || !last) break;
    from = Buffer.concat([last.key, Buffer.from([0])]); // the next key after the last one read
  }
  return names;
}

/** The escaping of keys.ts's namePrefix, for a start of a name. */
function escapeName(text: string): string {
  return text.replaceAll('%', '%25').replaceAll('/', '%2F');
}

function unescapeName(text: string): string {
  return text.replace(/%2F|%25/g, (code) => (code === '%2F' ? '/' : '%'));
}
