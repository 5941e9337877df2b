import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import type { SessionRenewalListener } from '../../src/session-liveness.js';

/** A provider that tells the test of every answered heartbeat, so a fault can start right after one. */
export class ObservedProvider extends ZooKeeperLockProvider {
  readonly #renewed = new Set<() => void>();
  protected override readonly reportSessionRenewal: SessionRenewalListener = (outcome) => {
    if (outcome !== 'renewed') return;
    for (const listener of [...this.#renewed]) listener();
  };

  /** Resolves right after the next answered heartbeat of the provider's session. */
  nextHeartbeat(): Promise<void> {
    return new Promise((resolve) => {
      const once = () => {
        this.#renewed.delete(once);
        resolve();
      };
      this.#renewed.add(once);
    });
  }
}
