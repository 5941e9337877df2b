import type { Etcd3 } from 'etcd3';
import { prefixEnd } from './keys.js';

/** Keys per range call, and calls at most: list() is bounded however large the keyspace. */
const PAGE = 1_000;
const MAX_PAGES = 1_000;
/** A lock or election key: `<escaped name>/<lease id in hex>`, the name without a '/' of its own. */
const LOCK_KEY = /^([^/]+)\/[0-9a-f]+$/;
/** A read-write lock's key under its folder: `<escaped name>/(read|write)-<lease hex>-<attempt id>`. */
const READ_WRITE_KEY = /^([^/]+)\/(?:read|write)-[0-9a-f]+-[0-9a-f-]+$/;

/** Where a range of names is read, and which keys name them. */
interface NamesRange {
  client: Etcd3;
  /** The keys' folder: the provider's namespace, or the read-write locks' folder under it. */
  folder: string;
  namePrefix: string;
  callTimeoutMs: number;
  /** Matches a key after the folder; group 1 is the escaped name. */
  keyPattern: RegExp;
}

/**
 * The names that have keys under `namespace` + the escaped `namePrefix` (a name's first key holds
 * it, so a name with keys is held), read keys-only in pages, each with its own deadline.
 */
export function heldNamesRange(
  client: Etcd3,
  namespace: string,
  namePrefix: string,
  callTimeoutMs: number,
): Promise<string[]> {
  return namesIn({ client, folder: namespace, namePrefix, callTimeoutMs, keyPattern: LOCK_KEY });
}

/** The same for read-write locks, whose keys live under `folder` (see read-write.ts). */
export function heldReadWriteNames(
  client: Etcd3,
  folder: string,
  namePrefix: string,
  callTimeoutMs: number,
): Promise<string[]> {
  return namesIn({ client, folder, namePrefix, callTimeoutMs, keyPattern: READ_WRITE_KEY });
}

async function namesIn({
  client,
  folder: namespace,
  namePrefix,
  callTimeoutMs,
  keyPattern,
}: NamesRange): Promise<string[]> {
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
      const match = keyPattern.exec(key.subarray(namespace.length).toString('utf8'));
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
