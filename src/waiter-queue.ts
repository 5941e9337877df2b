/**
 * provider.queue(key): the requests waiting for a name, in the order they will be granted, as far as
 * the backend records them. Where a provider lines up its own requests of a name before one of them
 * queues on the server (etcd, ZooKeeper, Redis, PostgreSQL: a KeyedFifo), the server's queue holds
 * one entry per process and line: an entry then stands for that line, and only this process knows
 * how many requests its own line holds. Adapters read the server's entries; the line-up is here.
 */

import { InvalidArgumentError } from './errors.js';
import type { QueuedWaiter, QueueOptions } from './lock-types.js';

/** How many entries queue() gives when the caller sets no limit. */
export const DEFAULT_QUEUE_LIMIT = 100;
/** The most entries one queue() call reads: a longer queue is read in one call no further. */
export const MAX_QUEUE_LIMIT = 10_000;

const KNOWN_OPTIONS = new Set(['limit']);

/** The number of entries to give: `limit` when it is an integer 1..MAX_QUEUE_LIMIT, else a refusal. */
export function validateQueueOptions(options: unknown): number {
  if (options === undefined) return DEFAULT_QUEUE_LIMIT;
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('options', 'expected an object');
  for (const name of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(name)) throw new InvalidArgumentError('options', `unknown option "${name}"`);
  }
  const { limit } = options as QueueOptions;
  if (limit === undefined) return DEFAULT_QUEUE_LIMIT;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_QUEUE_LIMIT) {
    throw new InvalidArgumentError(
      'limit',
      `expected an integer from 1 to ${MAX_QUEUE_LIMIT}, got ${String(limit)}`,
    );
  }
  return limit;
}

/** One entry of a name's queue as the server records it, in the server's order. */
export interface ServerQueueEntry {
  /** The owner text the entry carries; undefined when none, or when it cannot be read. */
  owner: string | undefined;
  /** When it joined the queue, where the server records it. */
  since: Date | undefined;
  /** Whether the entry is this provider's own (the head of its line for the name). */
  ours: boolean;
}

/**
 * The queue as queue() gives it: the server's entries in order, ours standing for its whole line
 * (itself and the `behind` requests lined up in this process after it, KeyedFifo.behind), another
 * process's for a line whose length only that process knows.
 * When this provider's turn is not in the server's queue (it holds the name, or is between two
 * tries) while requests wait behind it, they queue on the server only once the turn ends, after
 * every entry there now: one entry at the end stands for them (its owner and since unknown here).
 */
export function lineUp(entries: readonly ServerQueueEntry[], behind: number, limit: number): QueuedWaiter[] {
  const queue: QueuedWaiter[] = entries.map(({ owner, since, ours }) => ({
    owner,
    since,
    requests: ours ? 1 + behind : undefined,
  }));
  if (behind > 0 && !entries.some((entry) => entry.ours)) {
    queue.push({ owner: undefined, since: undefined, requests: behind });
  }
  return queue.slice(0, limit);
}
