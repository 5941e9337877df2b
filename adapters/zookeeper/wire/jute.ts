/**
 * Jute, ZooKeeper's record encoding: big-endian ints and longs, a byte for a boolean, and
 * length-prefixed (int32, -1 = null) buffers, UTF-8 strings and vectors.
 */

/** A frame that does not decode: the connection that sent it can no longer be trusted. */
export class WireError extends Error {
  override name = 'WireError';
}

export class JuteWriter {
  #buf = Buffer.allocUnsafe(256);
  #pos = 0;

  #room(n: number): void {
    if (this.#pos + n <= this.#buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#pos + n));
    this.#buf.copy(next, 0, 0, this.#pos);
    this.#buf = next;
  }

  int(v: number): this {
    this.#room(4);
    this.#pos = this.#buf.writeInt32BE(v, this.#pos);
    return this;
  }

  long(v: bigint): this {
    this.#room(8);
    this.#pos = this.#buf.writeBigInt64BE(v, this.#pos);
    return this;
  }

  bool(v: boolean): this {
    this.#room(1);
    this.#pos = this.#buf.writeUInt8(v ? 1 : 0, this.#pos);
    return this;
  }

  buffer(v: Buffer | null): this {
    if (v === null) return this.int(-1);
    this.int(v.length);
    this.#room(v.length);
    this.#pos += v.copy(this.#buf, this.#pos);
    return this;
  }

  string(v: string | null): this {
    return this.buffer(v === null ? null : Buffer.from(v, 'utf8'));
  }

  vector<T>(items: readonly T[], each: (w: this, item: T) => void): this {
    this.int(items.length);
    for (const item of items) each(this, item);
    return this;
  }

  /** The record with its 4-byte length prefix: one frame on the wire. */
  frame(): Buffer {
    const out = Buffer.allocUnsafe(this.#pos + 4);
    out.writeInt32BE(this.#pos, 0);
    this.#buf.copy(out, 4, 0, this.#pos);
    return out;
  }
}

/** Reads one record; every read is bounds-checked and throws WireError instead of reading garbage. */
export class JuteReader {
  #pos = 0;

  constructor(readonly buf: Buffer) {}

  get remaining(): number {
    return this.buf.length - this.#pos;
  }

  #take(n: number): number {
    if (n < 0 || this.#pos + n > this.buf.length) {
      throw new WireError(`record truncated: need ${n} bytes at ${this.#pos} of ${this.buf.length}`);
    }
    const at = this.#pos;
    this.#pos += n;
    return at;
  }

  int(): number {
    return this.buf.readInt32BE(this.#take(4));
  }

  long(): bigint {
    return this.buf.readBigInt64BE(this.#take(8));
  }

  bool(): boolean {
    return this.buf[this.#take(1)] !== 0;
  }

  buffer(): Buffer | null {
    const n = this.int();
    if (n === -1) return null;
    if (n < -1) throw new WireError(`negative length ${n}`);
    const at = this.#take(n);
    return this.buf.subarray(at, at + n);
  }

  string(): string | null {
    return this.buffer()?.toString('utf8') ?? null;
  }

  vector<T>(each: (r: this) => T): T[] | null {
    const n = this.int();
    if (n === -1) return null;
    // Each item takes at least one byte: a count larger than what is left is garbage.
    if (n < -1 || n > this.remaining) throw new WireError(`bad vector length ${n}`);
    const items: T[] = [];
    for (let i = 0; i < n; i++) items.push(each(this));
    return items;
  }
}
