/** What a provider tells operators about: `provider.on(event, listener)`. */

import type { LossReason } from './errors.js';
import type { BackendName } from './lock-types.js';

interface GrantFacts {
  backend: BackendName;
  key: string;
  owner: string | undefined;
  fencingToken: bigint;
}

/** Each event a provider emits, by name, with what its listener receives. */
export interface ProviderEventMap {
  /** A lock (or permit) was handed to the caller. */
  grant: GrantFacts;
  /** A grant's signal aborted for a reason other than its own release. */
  loss: GrantFacts & { reason: LossReason };
  /** A renewal (keepalive, heartbeat, PEXPIRE) failed; the grant may still be confirmed later. */
  'renew-failed': GrantFacts & { error: unknown };
  /** The holder released its grant. */
  release: GrantFacts;
  /** An operator removed the current grant with forceRelease. */
  'force-release': Omit<GrantFacts, 'owner'> & { owner: string | undefined; reason: string; by: string };
  /**
   * A `ttlMs` (an acquire's or the provider's) that this backend cannot honour per lock: its session
   * or connection decides how long a dead holder's lock stays held. Emitted once per provider.
   */
  'ttl-ignored': TtlIgnored;
}

/** What governs a dead holder's lock instead of ttlMs, and for how long (ms). */
export interface TtlIgnored {
  backend: BackendName;
  /** The ttlMs asked for. */
  ttlMs: number;
  /** The option that governs instead: 'sessionTimeoutMs' (ZooKeeper), 'serverKeepalive' (PostgreSQL). */
  governedBy: string;
  /** How long, at most, a dead or cut-off holder's lock stays held (ms), as that option sets it. */
  boundMs: number;
}

/** The name of a provider event: `grant`, `loss`, `renew-failed`, `release`, `force-release`. */
export type ProviderEventName = keyof ProviderEventMap;
/** A listener of `provider.on(event, listener)`; one that throws is reported as a process warning. */
export type ProviderEventListener<E extends ProviderEventName> = (event: ProviderEventMap[E]) => void;

/**
 * Listeners per event name. A listener that throws is reported on the process's 'warning' channel
 * and does not stop the others: an operator's hook must never break a grant or a release.
 */
export class ProviderEvents {
  readonly #listeners = new Map<ProviderEventName, Set<(event: never) => void>>();

  on<E extends ProviderEventName>(event: E, listener: ProviderEventListener<E>): void {
    let set = this.#listeners.get(event);
    if (!set) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as (event: never) => void);
  }

  off<E extends ProviderEventName>(event: E, listener: ProviderEventListener<E>): void {
    this.#listeners.get(event)?.delete(listener as (event: never) => void);
  }

  /** Cheap when nobody listens: callers may skip building the event when this is false. */
  has(event: ProviderEventName): boolean {
    return (this.#listeners.get(event)?.size ?? 0) > 0;
  }

  emit<E extends ProviderEventName>(event: E, payload: ProviderEventMap[E]): void {
    const set = this.#listeners.get(event);
    if (!set) return;
    for (const listener of set) {
      try {
        (listener as ProviderEventListener<E>)(payload);
      } catch (error) {
        process.emitWarning(`fencekit: a "${event}" listener threw: ${String(error)}`);
      }
    }
  }
}
