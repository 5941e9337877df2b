import { InvalidArgumentError } from '../../src/errors.js';
import type { EtcdSession } from './session.js';

/** Distinct lease TTLs a provider keeps sessions for besides its own sessionTtlMs. */
export const MAX_SESSION_TTLS = 8;

/**
 * etcd leases count whole seconds: a TTL is rounded up (at least 1 s), never down. The server may
 * raise a very short one to its own minimum (1.5 election timeouts); the loss signal follows the
 * TTL the server answers with, so it still fires before the lease can expire there.
 */
export function leaseSeconds(ttlMs: number): number {
  return Math.max(1, Math.ceil(ttlMs / 1000));
}

/**
 * A provider's sessions, one per lease TTL in whole seconds, so that an acquire's ttlMs is how long
 * its key outlives a dead holder. Each TTL's session is opened on first use, replaced once lost, and
 * kept until close(): at most MAX_SESSION_TTLS distinct TTLs besides sessionTtlMs's, beyond which
 * an acquire with a new TTL is refused (a TTL computed per call would otherwise open a lease and a
 * keepalive per value); an acquire without ttlMs is always served.
 */
export class EtcdSessions {
  readonly #defaultSeconds: number;
  readonly #open: (ttlMs: number) => Promise<EtcdSession>;
  readonly #byTtl = new Map<number, SessionSlot>();

  /** open(ttlMs): grants a session with that lease TTL (whole seconds, in ms). */
  constructor(defaultTtlMs: number, open: (ttlMs: number) => Promise<EtcdSession>) {
    this.#defaultSeconds = leaseSeconds(defaultTtlMs);
    this.#open = open;
  }

  /**
   * The live session for ttlMs when one is granted already, without waiting: an acquire on a warm
   * provider then sets no timer and awaits nothing for it. undefined: use current().
   */
  live(ttlMs?: number): EtcdSession | undefined {
    return this.#byTtl.get(this.#seconds(ttlMs))?.live();
  }

  /** The live session for ttlMs (undefined: the provider's sessionTtlMs), opened if need be. */
  current(ttlMs?: number): Promise<EtcdSession> {
    const seconds = this.#seconds(ttlMs);
    let slot = this.#byTtl.get(seconds);
    if (!slot) {
      const others = [...this.#byTtl.keys()].filter((kept) => kept !== this.#defaultSeconds);
      if (seconds !== this.#defaultSeconds && others.length >= MAX_SESSION_TTLS) {
        const kept = others.map((s) => `${s} s`).join(', ');
        throw new InvalidArgumentError(
          'ttlMs',
          `an etcd provider keeps sessions for at most ${MAX_SESSION_TTLS} distinct TTLs (whole seconds) ` +
            `besides sessionTtlMs; it has ${kept}: use one of those, sessionTtlMs, or another provider`,
        );
      }
      slot = new SessionSlot(() => this.#open(seconds * 1000));
      this.#byTtl.set(seconds, slot);
    }
    return slot.current();
  }

  #seconds(ttlMs: number | undefined): number {
    return ttlMs === undefined ? this.#defaultSeconds : leaseSeconds(ttlMs);
  }

  /** The provider's own session (sessionTtlMs), if one was opened. */
  defaultSession(): Promise<EtcdSession | undefined> {
    return this.#byTtl.get(this.#defaultSeconds)?.opened() ?? Promise.resolve(undefined);
  }

  /** Every session opened so far (the last of each TTL), for close() and abandon(). */
  async all(): Promise<EtcdSession[]> {
    const opened = await Promise.all([...this.#byTtl.values()].map((slot) => slot.opened()));
    return opened.filter((session) => session !== undefined);
  }
}

/** One TTL's session: the live one, or a new one once it was lost. */
class SessionSlot {
  readonly #open: () => Promise<EtcdSession>;
  #session: Promise<EtcdSession> | undefined;
  /** What #session resolved with, once it did (the same session: current() would answer it). */
  #granted: EtcdSession | undefined;

  constructor(open: () => Promise<EtcdSession>) {
    this.#open = open;
  }

  /**
   * The live session, or a new one when the last was lost. Concurrent callers share one grant: only
   * the first caller to find the session dead opens the next one; the others then wait for it.
   */
  current(): Promise<EtcdSession> {
    const current = this.#session;
    if (!current) return this.#reopen();
    return current.then((session) => {
      if (session.alive) return session;
      return this.#session === current ? this.#reopen() : this.current();
    });
  }

  /** The granted session if it is alive, at once (undefined while a grant is under way, or it ended). */
  live(): EtcdSession | undefined {
    return this.#granted?.alive ? this.#granted : undefined;
  }

  /** The last session granted, if its grant succeeded. */
  opened(): Promise<EtcdSession | undefined> {
    return this.#session?.catch(() => undefined) ?? Promise.resolve(undefined);
  }

  #reopen(): Promise<EtcdSession> {
    const opening = this.#open();
    this.#session = opening;
    this.#granted = undefined;
    opening.then(
      (session) => {
        if (this.#session === opening) this.#granted = session;
      },
      () => {
        if (this.#session === opening) this.#session = undefined;
      },
    );
    return opening;
  }
}
