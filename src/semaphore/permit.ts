import type { OwnedLock } from '../ownership.js';
import type { Permit } from './types.js';

/** The Permit a user gets: the backend's OwnedLock (signal, guarded release) plus its permit count. */
export class PermitHandle implements Permit {
  readonly permits: number;
  readonly #lock: OwnedLock;

  constructor(lock: OwnedLock, permits: number) {
    this.#lock = lock;
    this.permits = permits;
  }

  get key(): string {
    return this.#lock.key;
  }
  get fencingToken(): bigint {
    return this.#lock.fencingToken;
  }
  get ownerToken(): string {
    return this.#lock.ownerToken;
  }
  get signal(): AbortSignal {
    return this.#lock.signal;
  }
  get held(): boolean {
    return this.#lock.held;
  }
  release(): Promise<void> {
    return this.#lock.release();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#lock.release();
  }
  toJSON(): Record<string, unknown> {
    return { ...this.#lock.toJSON(), permits: this.permits };
  }
}
