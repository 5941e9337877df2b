import { type JuteReader, JuteWriter, WireError } from './jute.js';

/** Request types (ZooDefs.OpCode). */
export const Op = {
  create: 1,
  delete: 2,
  exists: 3,
  getData: 4,
  setData: 5,
  setACL: 7,
  getChildren: 8,
  sync: 9,
  ping: 11,
  getChildren2: 12,
  check: 13,
  multi: 14,
  create2: 15,
  /** ZooKeeper 3.5.1 and later; an older server answers UNIMPLEMENTED and closes the connection. */
  createContainer: 19,
  auth: 100,
  setWatches: 101,
  closeSession: -11,
  error: -1,
} as const;

/** Reserved xids of replies that answer no numbered request. */
export const Xid = { notification: -1, ping: -2, auth: -4, setWatches: -8 } as const;

export const CreateMode = {
  PERSISTENT: 0,
  EPHEMERAL: 1,
  PERSISTENT_SEQUENTIAL: 2,
  EPHEMERAL_SEQUENTIAL: 3,
  /** Only with the createContainer request: a node the server deletes once it has had children and has none left. */
  CONTAINER: 4,
} as const;

export const Perms = { READ: 1, WRITE: 2, CREATE: 4, DELETE: 8, ADMIN: 16, ALL: 31 } as const;

export interface ACL {
  perms: number;
  scheme: string;
  id: string;
}

export const OPEN_ACL_UNSAFE: readonly ACL[] = [{ perms: Perms.ALL, scheme: 'world', id: 'anyone' }];
/** All rights to the identities the session authenticated as (needs auth, e.g. digest). */
export const CREATOR_ALL_ACL: readonly ACL[] = [{ perms: Perms.ALL, scheme: 'auth', id: '' }];

export interface Stat {
  czxid: bigint;
  mzxid: bigint;
  ctime: bigint;
  mtime: bigint;
  version: number;
  cversion: number;
  aversion: number;
  /**
   * The session id of an ephemeral node's owner, 0n for a persistent node (what a container shows
   * differs between server versions: fencekit only compares this with session ids).
   */
  ephemeralOwner: bigint;
  dataLength: number;
  numChildren: number;
  pzxid: bigint;
}

export function readStat(r: JuteReader): Stat {
  return {
    czxid: r.long(),
    mzxid: r.long(),
    ctime: r.long(),
    mtime: r.long(),
    version: r.int(),
    cversion: r.int(),
    aversion: r.int(),
    ephemeralOwner: r.long(),
    dataLength: r.int(),
    numChildren: r.int(),
    pzxid: r.long(),
  };
}

const writeAcl = (w: JuteWriter, acl: ACL) => w.int(acl.perms).string(acl.scheme).string(acl.id);

/** The request records (bodies after the request header), by op. */
export const encode = {
  create(w: JuteWriter, path: string, data: Buffer, acl: readonly ACL[], mode: number): void {
    w.string(path).buffer(data).vector(acl, writeAcl).int(mode);
  },
  pathVersion(w: JuteWriter, path: string, version: number): void {
    w.string(path).int(version);
  },
  pathWatch(w: JuteWriter, path: string, watch: boolean): void {
    w.string(path).bool(watch);
  },
  setData(w: JuteWriter, path: string, data: Buffer, version: number): void {
    w.string(path).buffer(data).int(version);
  },
  setACL(w: JuteWriter, path: string, acl: readonly ACL[], version: number): void {
    w.string(path).vector(acl, writeAcl).int(version);
  },
  path(w: JuteWriter, path: string): void {
    w.string(path);
  },
};

/** One operation of a multi. */
export type MultiOp =
  | { op: 'create'; path: string; data: Buffer; acl: readonly ACL[]; mode: number }
  | { op: 'delete'; path: string; version: number }
  | { op: 'setData'; path: string; data: Buffer; version: number }
  | { op: 'check'; path: string; version: number };

export type MultiResult =
  | { op: 'create'; path: string }
  | { op: 'delete' }
  | { op: 'setData'; stat: Stat }
  | { op: 'check' }
  | { op: 'error'; err: number };

export function encodeMulti(w: JuteWriter, ops: readonly MultiOp[], at: (path: string) => string): void {
  for (const o of ops) {
    w.int(Op[o.op]).bool(false).int(-1); // MultiHeader(type, done, err)
    if (o.op === 'create') encode.create(w, at(o.path), o.data, o.acl, o.mode);
    else if (o.op === 'setData') encode.setData(w, at(o.path), o.data, o.version);
    else encode.pathVersion(w, at(o.path), o.version);
  }
  w.int(-1).bool(true).int(-1);
}

export function decodeMulti(r: JuteReader, from: (path: string) => string): MultiResult[] {
  const results: MultiResult[] = [];
  for (;;) {
    const type = r.int();
    const done = r.bool();
    const err = r.int();
    if (done) return results;
    if (type === Op.create) results.push({ op: 'create', path: from(r.string() ?? '') });
    else if (type === Op.create2 || type === Op.createContainer) {
      const path = from(r.string() ?? '');
      readStat(r);
      results.push({ op: 'create', path });
    } else if (type === Op.delete) results.push({ op: 'delete' });
    else if (type === Op.setData) results.push({ op: 'setData', stat: readStat(r) });
    else if (type === Op.check) results.push({ op: 'check' });
    else if (type === Op.error) results.push({ op: 'error', err: r.int() });
    else throw new WireError(`unknown multi result type ${type} (err ${err})`);
  }
}

export { JuteWriter };
