import { WireError } from './jute.js';

/** Largest frame accepted (ZooKeeper's own jute.maxbuffer default is 1 MB plus some slack). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;

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
