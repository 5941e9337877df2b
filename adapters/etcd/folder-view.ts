import { type Etcd3, type IKeyValue, type IWatchResponse, SortOrder, SortTarget, type Watcher } from 'etcd3';
import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { bounded } from './bounded.js';
import { prefixEnd } from './keys.js';

/** Every key under a folder, as of a revision. */
export interface FolderState {
  /** Every change up to this revision is in `groups` (and whole revisions after it, read later). */
  readonly revision: bigint;
  /**
   * The keys by subfolder (the part of the key after the prefix up to its first '/', with it:
   * 'locks/'; '' for a key with none), each by key (latin1) in create-revision order: a new key
   * has the highest create revision of all, so appending keeps the order. The view's own maps,
   * changed in place by each whole watch response.
   */
  readonly groups: ReadonlyMap<string, ReadonlyMap<string, IKeyValue>>;
}

/** Told of each new state: after each watch response, and after each (re)build. */
export interface FolderListener {
  /** Read `state.groups` at once: the next watch response changes them. */
  changed(state: FolderState): void;
  /** The view ended for good (the provider closed): its listeners are owed an outage. */
  failed(error: BackendUnavailableError): void;
}

/**
 * A process's copy of every key under one folder (an etcd semaphore's name), kept by one read and a
 * watch from the revision after it, shared by all waiters of the provider on that folder: a change
 * costs one watch event per process, however many of its waiters look at it, and no call.
 *
 * A state is exact at its revision: etcd sends all the events of a revision in one watch response
 * (a Txn's put and delete come together), and the view applies a whole response before telling its
 * listeners. When the watch stream breaks the state is dropped at once and built again from a new
 * read: the etcd3 client would resume the watch after the revision of its last answer, which may
 * lie past events a catching-up watch had not delivered yet, and a missed event here could count a
 * permit as free. While there is no state, listeners hear nothing.
 */
export class FolderView {
  readonly #client: Etcd3;
  readonly #prefix: Buffer;
  readonly #callTimeoutMs: number;
  readonly #onIdle: () => void;
  readonly #listeners = new Set<FolderListener>();
  /** The copy: events apply to it from the read on, but it is a state only once the watch is confirmed. */
  #copy: { revision: bigint; groups: Map<string, Map<string, IKeyValue>> } | undefined;
  #live = false;
  #watcher: Watcher | undefined;
  /** Bumped by each drop: events and answers of an older watch or read are ignored. */
  #generation = 0;
  #building = false;
  readonly #stopped = new AbortController();

  constructor(client: Etcd3, prefix: Buffer, callTimeoutMs: number, onIdle: () => void) {
    this.#client = client;
    this.#prefix = prefix;
    this.#callTimeoutMs = callTimeoutMs;
    this.#onIdle = onIdle;
  }

  /** The current state; undefined while it is being (re)built. */
  get state(): FolderState | undefined {
    return this.#live ? this.#copy : undefined;
  }

  /** Listens from now on (building the view if needed); returns the unsubscribe. */
  listen(listener: FolderListener): () => void {
    if (this.#stopped.signal.aborted) {
      listener.failed(new BackendUnavailableError('etcd: the provider is closed'));
      return () => undefined;
    }
    this.#listeners.add(listener);
    if (!this.#live && !this.#building) void this.#build();
    // The last listener gone, the watch goes too: a request leaves the front granted (or gone), and
    // its next one queues far back, where it would only pay for events it does not need.
    return () => {
      if (!this.#listeners.delete(listener) || this.#listeners.size > 0 || this.#stopped.signal.aborted)
        return;
      this.stop();
      this.#onIdle();
    };
  }

  /** Ends the view for good (the provider closes): its watch is cancelled, its listeners fail. */
  stop(): void {
    if (this.#stopped.signal.aborted) return;
    this.#stopped.abort();
    this.#drop();
    const closed = new BackendUnavailableError('etcd: the provider is closed');
    for (const listener of [...this.#listeners]) listener.failed(closed);
    this.#listeners.clear();
  }

  /** Forgets the copy and cancels the watch. */
  #drop(): void {
    this.#generation += 1;
    this.#copy = undefined;
    this.#live = false;
    const watcher = this.#watcher;
    this.#watcher = undefined;
    void watcher?.cancel().catch(() => undefined);
  }

  /**
   * Reads the folder, then watches it from the next revision, while someone listens. A failed try
   * (each of its calls bounded by callTimeoutMs) is tried again after a jittered backoff, and its
   * listeners keep waiting meanwhile: a waiter that left would delete its queue key and queue again
   * at the back, behind requests that came later, so a short outage would reorder the queue. Each
   * waiter still ends on its own terms (its waitMs, its signal, its session's loss: its queue key
   * and so its place live while its session does). A try overtaken by a drop (the watch it made
   * broke at once) starts over.
   */
  async #build(): Promise<void> {
    this.#building = true;
    const delays = jitteredDelays({ initialMs: 50, maxMs: 1_000 });
    try {
      while (this.#listeners.size > 0 && !this.#stopped.signal.aborted) {
        this.#drop();
        const generation = this.#generation;
        try {
          await this.#readAndWatch(generation);
        } catch {
          if (this.#stopped.signal.aborted) return;
          this.#drop();
          await sleepUnlessWoken(delays.next().value, this.#stopped.signal).done.catch(() => undefined);
          continue;
        }
        if (generation === this.#generation) {
          this.#live = true;
          this.#tell();
          return;
        }
      }
    } finally {
      this.#building = false;
    }
  }

  async #readAndWatch(generation: number): Promise<void> {
    const timeoutMs = this.#callTimeoutMs;
    const read = await bounded(
      this.#client.kv.range(
        {
          key: this.#prefix,
          range_end: prefixEnd(this.#prefix),
          sort_target: SortTarget.Create,
          sort_order: SortOrder.Ascend,
        },
        { deadline: new Date(Date.now() + timeoutMs) },
      ),
      this.#stopped.signal,
      timeoutMs,
      'reading the semaphore',
    );
    if (generation !== this.#generation) return;
    const revision = BigInt(read.header.revision);
    this.#copy = { revision, groups: new Map() };
    for (const kv of read.kvs) this.#put(this.#copy.groups, kv);
    // The prefix as bytes: a string would be sent as its UTF-8 encoding, so a latin1 spelling of a
    // non-ASCII name's bytes would watch other keys, and the view would never hear a release.
    const watcher = this.#client
      .watch()
      .prefix(this.#prefix)
      .startRevision((revision + 1n).toString())
      .watcher();
    this.#watcher = watcher;
    // Before the watch is confirmed a break fails this try; after it, it rebuilds the view. An 'error'
    // is always listened to (unheard, it throws inside the etcd3 client); etcd ended that watch, so
    // the client dropped it and it is not cancelled again.
    let confirmed = false;
    let failTry: (error: unknown) => void = () => undefined;
    const broken = new Promise<never>((_, reject) => {
      failTry = reject;
    });
    broken.catch(() => undefined);
    const broke = (error: unknown) => {
      if (generation !== this.#generation) return;
      if (confirmed) this.#rebuild();
      else failTry(error);
    };
    watcher.on('error', (error: Error) => {
      if (this.#watcher === watcher) this.#watcher = undefined;
      broke(error);
    });
    watcher.on('disconnected', (error: Error) => broke(error));
    // Applied from the first event on, even one that comes in the same tick as the confirmation.
    watcher.on('data', (res: IWatchResponse) => {
      if (generation === this.#generation) this.#apply(res);
    });
    // Confirmed in the handler itself: a break heard between it and the end of the await below is
    // a break of a confirmed watch, and rebuilds the view (#build sees the new generation and starts
    // over) rather than going unheard while the view goes live on a dead watch.
    const created = new Promise<void>((resolve) =>
      watcher.once('connected', () => {
        confirmed = true;
        resolve();
      }),
    );
    await bounded(Promise.race([created, broken]), this.#stopped.signal, timeoutMs, 'watching the semaphore');
  }

  /** The stream broke or etcd ended the watch: the copy may miss events, so it is built anew. */
  #rebuild(): void {
    this.#drop();
    if (!this.#building && this.#listeners.size > 0) void this.#build();
  }

  #apply(res: IWatchResponse): void {
    const copy = this.#copy;
    if (!copy || res.events.length === 0) return;
    let revision = copy.revision;
    for (const event of res.events) {
      const at = BigInt(event.kv.mod_revision);
      if (at > revision) revision = at;
      if (event.type === 'Delete')
        this.#group(copy.groups, event.kv.key)?.delete(event.kv.key.toString('latin1'));
      else this.#put(copy.groups, event.kv);
    }
    this.#copy = { revision, groups: copy.groups };
    if (this.#live) this.#tell();
  }

  /** A put keeps an existing key's place (its create revision is unchanged); a new key goes last. */
  #put(groups: Map<string, Map<string, IKeyValue>>, kv: IKeyValue): void {
    const name = this.#groupName(kv.key);
    let group = groups.get(name);
    if (!group) {
      group = new Map();
      groups.set(name, group);
    }
    group.set(kv.key.toString('latin1'), kv);
  }

  #group(groups: Map<string, Map<string, IKeyValue>>, key: Buffer): Map<string, IKeyValue> | undefined {
    return groups.get(this.#groupName(key));
  }

  #groupName(key: Buffer): string {
    const slash = key.indexOf(0x2f, this.#prefix.length);
    return slash < 0 ? '' : key.subarray(this.#prefix.length, slash + 1).toString('latin1');
  }

  #tell(): void {
    const state = this.state;
    if (!state) return;
    for (const listener of [...this.#listeners]) listener.changed(state);
  }
}
