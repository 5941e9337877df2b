import { InvalidArgumentError, StaleFencingTokenError } from '../errors.js';

interface Entry<V> {
  value: V;
  token: bigint;
}

/**
 * The storage side of fencing, in memory: it remembers, per resource, the highest fencing token it
 * has accepted and rejects any write that carries a lower one. A token equal to the highest is the
 * same holder writing again and is accepted. This is what a database does with
 * `UPDATE … SET fence_token = $t WHERE id = $id AND fence_token <= $t`.
 */
export class FencedStore<V> {
  readonly #entries = new Map<string, Entry<V>>();

  /** Stores value under resource, or throws StaleFencingTokenError if a newer holder already wrote. */
  write(resource: string, value: V, token: bigint): void {
    if (typeof token !== 'bigint') throw new InvalidArgumentError('token', 'expected a bigint fencing token');
    const current = this.#entries.get(resource);
    if (current && token < current.token) throw new StaleFencingTokenError(resource, token, current.token);
    this.#entries.set(resource, { value, token });
  }

  /** Like write, but answers false instead of throwing when the token is stale. */
  tryWrite(resource: string, value: V, token: bigint): boolean {
    try {
      this.write(resource, value, token);
      return true;
    } catch (error) {
      if (error instanceof StaleFencingTokenError) return false;
      throw error;
    }
  }

  read(resource: string): V | undefined {
    return this.#entries.get(resource)?.value;
  }

  /** The highest token accepted for resource, or undefined if none was. */
  highestToken(resource: string): bigint | undefined {
    return this.#entries.get(resource)?.token;
  }
}
