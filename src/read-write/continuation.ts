import type { LockLostError } from '../errors.js';
import { OwnedLock } from '../ownership.js';

/**
 * One backend grant seen through several handles: a write grant and the reads that continue it
 * (a downgrade). Each handle has its own `held`, signal and release; the grant stays on the
 * backend until the last handle is released, and its loss ends every handle with the same reason.
 */
export class ContinuedGrant {
  readonly #grant: OwnedLock;
  #handles = 0;

  constructor(grant: OwnedLock) {
    this.#grant = grant;
  }

  /** Held, and confirmed for at least `ms` more (what a new handle must have to be handed out). */
  heldFor(ms: number): boolean {
    return this.#grant.heldFor(ms);
  }

  /** A new handle on the grant, with the grant's token and its own ownerToken. */
  handle(ownerToken: string): OwnedLock {
    const grant = this.#grant;
    this.#handles += 1;
    const handle = new OwnedLock({
      key: grant.key,
      fencingToken: grant.fencingToken,
      ownerToken,
      // Read with the handle's: a grant whose session went is lost at once, timer or not.
      trustedWhile: () => grant.held,
      releaseOnBackend: () => this.#drop(),
    });
    grant.onEnd(() => handle.lose((grant.signal.reason as LockLostError).reason));
    return handle;
  }

  /** The last handle gone: the grant goes on the backend (guarded there, and run once). */
  async #drop(): Promise<void> {
    this.#handles -= 1;
    if (this.#handles === 0) await this.#grant.release();
  }
}
