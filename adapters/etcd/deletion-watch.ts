import type { Etcd3, IKeyValue, Watcher } from 'etcd3';

const ignore = () => undefined;

interface Subscriber {
  /**
   * Create revision of the held key: a delete at or before it was of an earlier key of that name.
   * Undefined until armed: deletes seen until then are kept in lastDeleted and judged by arm().
   */
  revision: bigint | undefined;
  lastDeleted: bigint;
  onDeleted: () => void;
}

/** A subscription made before the key's create revision is known (see DeletionWatch.subscribe). */
export interface DeletionSubscription {
  /** From now on onDeleted runs once on a delete after revision; at once if one was seen already. */
  arm(revision: bigint, onDeleted: () => void): void;
  stop(): void;
}

/**
 * One watch per provider over its namespace, deletes only, filtered here by key: a held key deleted
 * behind our back (its lease revoked, `etcdctl del`) is reported within one watch event, not at the
 * next keepalive. One watch for all locks rather than one per lock: an acquire sends nothing more
 * and a held lock costs one Map entry, where a watch per lock adds a round trip to every acquire
 * and a watcher to every held lock. The price: every delete in the namespace reaches every
 * provider, so a namespace of its own keeps that traffic to fencekit's keys. It watches from the
 * revision at its creation (no start revision: a watch made with a past start revision slows every
 * handoff), and the provider's first session is usable only once it is confirmed
 * (in parallel with the lease grant), so no key of ours exists before it. It lives as long as the
 * provider, which also keeps the etcd3 client's watch stream from being torn down while events
 * are in flight (a late event for a watch it no longer knows throws inside that client). If etcd
 * ends it (compaction during a reconnect), it is made again from the current revision; deletes in
 * between are then seen only through the keepalive (revoke).
 */
export class DeletionWatch {
  readonly #subscribers = new Map<string, Subscriber>();
  #watcher: Watcher;
  #closed = false;

  readonly #client: Etcd3;
  readonly #namespace: string;

  /** Settles once etcd confirmed the watch (or ended it): from then on no delete is missed. */
  readonly ready: Promise<void>;

  constructor(client: Etcd3, namespace: string) {
    this.#client = client;
    this.#namespace = namespace;
    this.#watcher = this.#start();
    const first = this.#watcher;
    this.ready = new Promise<void>((resolve) => {
      first.once('connected', () => resolve());
      first.once('error', () => resolve());
    });
  }

  #start(): Watcher {
    const watcher = this.#client.watch().prefix(this.#namespace).only('delete').watcher();
    watcher.on('delete', (kv: IKeyValue) => this.#deleted(kv));
    // Always listened to: an 'error' emitted with no listener would throw inside the etcd3 client.
    // Ended by etcd, the client has dropped it already (cancelling it again would make it throw).
    watcher.on('error', () => {
      if (this.#closed) return;
      try {
        this.#watcher = this.#start();
      } catch {
        // The client is closed: nothing left to watch for.
      }
    });
    return watcher;
  }

  /** Calls onDeleted once when key (created at revision) is deleted; returns the unsubscribe. */
  watch(key: Buffer, revision: bigint, onDeleted: () => void): () => void {
    const subscription = this.subscribe(key);
    subscription.arm(revision, onDeleted);
    return () => subscription.stop();
  }

  /**
   * Listens for key's deletion from now on, before its create revision is known: made before the
   * enqueue Txn is sent, so a delete that lands between the last read and the grant is not missed.
   */
  subscribe(key: Buffer): DeletionSubscription {
    const id = key.toString('latin1');
    const subscriber: Subscriber = { revision: undefined, lastDeleted: 0n, onDeleted: ignore };
    this.#subscribers.set(id, subscriber);
    const current = () => this.#subscribers.get(id) === subscriber;
    return {
      arm: (revision, onDeleted) => {
        subscriber.revision = revision;
        subscriber.onDeleted = onDeleted;
        if (current() && subscriber.lastDeleted > revision) {
          this.#subscribers.delete(id);
          onDeleted();
        }
      },
      stop: () => {
        if (current()) this.#subscribers.delete(id);
      },
    };
  }

  close(): void {
    this.#closed = true;
    this.#subscribers.clear();
    void this.#watcher.cancel().catch(ignore);
  }

  #deleted(kv: IKeyValue): void {
    const id = kv.key.toString('latin1');
    const subscriber = this.#subscribers.get(id);
    if (!subscriber) return;
    const revision = BigInt(kv.mod_revision);
    if (subscriber.revision === undefined) {
      if (revision > subscriber.lastDeleted) subscriber.lastDeleted = revision;
      return;
    }
    if (revision <= subscriber.revision) return;
    this.#subscribers.delete(id);
    subscriber.onDeleted();
  }
}
