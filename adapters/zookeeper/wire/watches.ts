/** Server watch kinds: a node's data (getData, exists on a node), its creation (exists on no node), its children. */
export type WatchKind = 'data' | 'exist' | 'child';

export type WatchEventType = 'created' | 'deleted' | 'dataChanged' | 'childrenChanged' | 'sessionEnded';

export interface WatchEvent {
  type: WatchEventType;
  path: string;
}

export type WatchListener = (event: WatchEvent) => void;

/** Server event type numbers (Watcher.Event.EventType). */
const EVENT_TYPES: Record<number, WatchEventType> = {
  1: 'created',
  2: 'deleted',
  3: 'dataChanged',
  4: 'childrenChanged',
};

/** Which kinds of watch an event triggers (the server drops exactly those). */
const TRIGGERS: Record<WatchEventType, readonly WatchKind[]> = {
  created: ['data', 'exist'],
  deleted: ['data', 'exist', 'child'],
  dataChanged: ['data', 'exist'],
  childrenChanged: ['child'],
  sessionEnded: ['data', 'exist', 'child'],
};

export function eventType(type: number): WatchEventType | undefined {
  return EVENT_TYPES[type];
}

/** A listener's fault must not end the connection that delivered the event, nor the process. */
function notify(listener: WatchListener, event: WatchEvent): void {
  try {
    listener(event);
  } catch (error) {
    process.emitWarning(`zookeeper watch listener failed: ${String(error)}`);
  }
}

/**
 * The session's watches: one registration per (kind, path), shared by every local listener of it.
 * A server watch fires once, so firing clears the registration. A listener that gives up removes
 * itself, and the registration goes with its last listener: nothing piles up for paths nobody
 * waits on (the server's copy fires once more, to nobody).
 */
export class WatchRegistry {
  readonly #byKind: Record<WatchKind, Map<string, Set<WatchListener>>> = {
    data: new Map(),
    exist: new Map(),
    child: new Map(),
  };

  add(kind: WatchKind, path: string, listener: WatchListener): void {
    const map = this.#byKind[kind];
    let set = map.get(path);
    if (!set) {
      set = new Set();
      map.set(path, set);
    }
    set.add(listener);
  }

  /** Removes listener from path's registrations of every kind. */
  remove(path: string, listener: WatchListener): void {
    for (const map of Object.values(this.#byKind)) {
      const set = map.get(path);
      if (set?.delete(listener) && set.size === 0) map.delete(path);
    }
  }

  /** Delivers an event to the listeners it concerns, each once, and clears their registrations. */
  fire(type: WatchEventType, path: string): void {
    const listeners = new Set<WatchListener>();
    for (const kind of TRIGGERS[type]) {
      const map = this.#byKind[kind];
      for (const listener of map.get(path) ?? []) listeners.add(listener);
      map.delete(path);
    }
    for (const listener of listeners) notify(listener, { type, path });
  }

  /** The session ended: every listener hears it once, and nothing stays registered. */
  endAll(): void {
    const all = new Map<WatchListener, string>();
    for (const map of Object.values(this.#byKind)) {
      for (const [path, set] of map) for (const listener of set) all.set(listener, path);
      map.clear();
    }
    for (const [listener, path] of all) notify(listener, { type: 'sessionEnded', path });
  }

  paths(kind: WatchKind): string[] {
    return [...this.#byKind[kind].keys()];
  }

  /** Registrations (kind, path) held, for tests and metrics. */
  get size(): number {
    return this.#byKind.data.size + this.#byKind.exist.size + this.#byKind.child.size;
  }
}

/** One watch to hand to a new connection: its kind and its path on the server. */
export interface WatchEntry {
  kind: WatchKind;
  path: string;
}

/** A SetWatches request's bytes without its paths: length prefix, xid, op, zxid, three vector counts. */
const SET_WATCHES_FIXED_BYTES = 4 + 4 + 4 + 8 + 3 * 4;

/**
 * Cuts the entries into SetWatches requests whose encoded size stays within maxBytes (a path
 * longer than that alone goes in a request of its own: nothing smaller can carry it).
 */
export function setWatchesBatches(entries: readonly WatchEntry[], maxBytes: number): WatchEntry[][] {
  const batches: WatchEntry[][] = [];
  let batch: WatchEntry[] = [];
  let bytes = SET_WATCHES_FIXED_BYTES;
  for (const entry of entries) {
    const size = 4 + Buffer.byteLength(entry.path, 'utf8');
    if (batch.length > 0 && bytes + size > maxBytes) {
      batches.push(batch);
      batch = [];
      bytes = SET_WATCHES_FIXED_BYTES;
    }
    batch.push(entry);
    bytes += size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}
