import { WireError } from './jute.js';

/**
 * Default largest frame accepted from a server, the client's jute.maxbuffer. The largest replies
 * are child lists: a lock node's name (`_c_<uuid>-lock-<seq>`, 55 bytes) takes 59 bytes in one, so
 * the Java client's 1 MiB default stops at about 17,700 waiters on one name, and past that every
 * acquire of the name, which lists its folder, would drop its connection. 16 MiB allows about
 * 284,000. A larger limit costs nothing until such a frame arrives: the bytes are held only as they
 * come, and a length prefix that promises more than ever comes trips the read deadline.
 */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** Below this a limit is a unit mistake, and would drop connections on ordinary child lists. */
export const MIN_FRAME_LIMIT = 64 * 1024;
/** Above this a length prefix is garbage, not a reply. */
export const MAX_FRAME_LIMIT = 1024 * 1024 * 1024;

/** Whether `bytes` is a frame limit the client accepts: an integer within MIN..MAX_FRAME_LIMIT. */
export function isFrameLimit(bytes: unknown): bytes is number {
  return (
    Number.isInteger(bytes) && (bytes as number) >= MIN_FRAME_LIMIT && (bytes as number) <= MAX_FRAME_LIMIT
  );
}

/**
 * Splits a byte stream into length-prefixed frames. A length outside 0..MAX_FRAME_BYTES is not a
 * frame boundary but a stream out of sync: it throws WireError and the connection must end. Each
 * connection has its own decoder, so a partial frame never outlives its socket.
 */
export class FrameDecoder {
  #pending: Buffer[] = [];
  #pendingBytes = 0;

  constructor(readonly maxFrame = MAX_FRAME_BYTES) {}

  /** Adds bytes; returns the complete frames (payloads without the length prefix) they finish. */
  push(chunk: Buffer): Buffer[] {
    this.#pending.push(chunk);
    this.#pendingBytes += chunk.length;
    const frames: Buffer[] = [];
    for (;;) {
      if (this.#pendingBytes < 4) break;
      const length = this.#lengthPrefix();
      if (length < 0 || length > this.maxFrame) throw new WireError(`bad frame length ${length}`);
      // Join the chunks only once the whole frame is here (a large frame arrives in many chunks).
      if (this.#pendingBytes < 4 + length) break;
      const head = this.#joined();
      frames.push(head.subarray(4, 4 + length));
      const rest = head.subarray(4 + length);
      this.#pending = rest.length > 0 ? [rest] : [];
      this.#pendingBytes = rest.length;
    }
    return frames;
  }

  /** Bytes held of an incomplete frame. */
  get buffered(): number {
    return this.#pendingBytes;
  }

  #lengthPrefix(): number {
    const first = this.#pending[0] as Buffer;
    return (first.length >= 4 ? first : this.#joined()).readInt32BE(0);
  }

  #joined(): Buffer {
    if (this.#pending.length > 1) this.#pending = [Buffer.concat(this.#pending, this.#pendingBytes)];
    return this.#pending[0] as Buffer;
  }
}
