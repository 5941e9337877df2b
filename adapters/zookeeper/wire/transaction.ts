import { type ACL, CreateMode, type MultiOp, OPEN_ACL_UNSAFE } from './ops.js';

/**
 * The operations of one multi, built by chaining (the shape node-zookeeper-client users know):
 * `tx.check(path).setData(other, data)`. Version -1 means any version.
 */
export class Transaction {
  readonly ops: MultiOp[] = [];

  create(
    path: string,
    data: Buffer = Buffer.alloc(0),
    acl: readonly ACL[] = OPEN_ACL_UNSAFE,
    mode: number = CreateMode.PERSISTENT,
  ): this {
    this.ops.push({ op: 'create', path, data, acl, mode });
    return this;
  }

  setData(path: string, data: Buffer, version = -1): this {
    this.ops.push({ op: 'setData', path, data, version });
    return this;
  }

  check(path: string, version = -1): this {
    this.ops.push({ op: 'check', path, version });
    return this;
  }

  remove(path: string, version = -1): this {
    this.ops.push({ op: 'delete', path, version });
    return this;
  }
}
