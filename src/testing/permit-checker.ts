import type { Permit } from '../semaphore/types.js';

/**
 * Records permit grants and ends from many contenders and finds every moment at which more than
 * `limit` permits were held with un-aborted signals, and every token that did not rise past one
 * already released before its request began. Findings are collected, not thrown, so that nothing
 * (a worker's catch, a backend's callback) can swallow them: the test asserts `violations` at the end.
 */
export class PermitChecker {
  readonly #limit: number;
  readonly #inside = new Set<Permit>();
  readonly #tokens = new Set<bigint>();
  /** Highest token among permits released so far. */
  #highestEnded = -1n;
  readonly violations: string[] = [];
  grants = 0;
  /** Most permits held at once (un-aborted signals). */
  peak = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Call before requesting: what the grant's token must exceed. */
  requesting(): bigint {
    return this.#highestEnded;
  }

  granted(permit: Permit, floor: bigint): void {
    this.grants += 1;
    if (this.#tokens.has(permit.fencingToken)) {
      this.violations.push(`token ${permit.fencingToken} granted twice`);
    }
    this.#tokens.add(permit.fencingToken);
    if (permit.fencingToken <= floor) {
      this.violations.push(`token ${permit.fencingToken} granted after token ${floor} was released`);
    }
    this.#inside.add(permit);
    let held = 0;
    for (const other of this.#inside) if (!other.signal.aborted) held += other.permits;
    this.peak = Math.max(this.peak, held);
    if (held > this.#limit) {
      this.violations.push(
        `${held} permits held at once (limit ${this.#limit}) when token ${permit.fencingToken} was granted`,
      );
    }
  }

  /** Call before release(): the work has stopped. */
  ending(permit: Permit): void {
    this.#inside.delete(permit);
    if (permit.fencingToken > this.#highestEnded) this.#highestEnded = permit.fencingToken;
  }
}
