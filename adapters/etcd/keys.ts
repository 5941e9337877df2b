/**
 * Key layout, compatible with `etcdctl lock` / `etcdctl elect` and Go's concurrency package:
 * a holder or waiter of name N is the key `<namespace><N>/<lease id in lowercase hex>`, and the
 * owner is the key with the smallest create revision under `<namespace><N>/`.
 *
 * Names nest ('a' and 'a/b'), but with the raw layout the prefix 'a/' would also cover 'a/b/…'
 * keys. So '%' and '/' inside a name are %-escaped ('a/b' → 'a%2Fb'): names without them keep the
 * raw layout and interoperate with etcdctl; names with them cannot collide with one another.
 */
export function namePrefix(namespace: string, name: string): string {
  return `${namespace}${name.replaceAll('%', '%25').replaceAll('/', '%2F')}/`;
}

/** Lease ids come as decimal strings from the etcd3 package; etcd's own tools print them in hex. */
export function leaseHex(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}

/** The smallest key greater than every key that starts with prefix (etcd's range_end for a prefix). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // all keys
}
