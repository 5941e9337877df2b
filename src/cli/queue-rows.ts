/**
 * A name's waiter queue as the CLI prints it (`inspect`) and the dashboard serves it (a name's
 * detail): an entry a row, in grant order, with what queue() tells of it and nothing more. An
 * owner is shown as a holder's is; queue() reads no other text a waiter stored.
 */
import { FencekitError } from '../errors.js';
import { processSecrets } from '../secret-mask.js';
import type { LockProvider, QueuedWaiter } from '../types.js';

/** One entry: its place (1 = next), times as ISO 8601; null where the backend does not record it. */
export interface QueueRow {
  position: number;
  owner: string | null;
  since: string | null;
  /** How long it has waited, where the backend records since when. */
  waitingMs: number | null;
  /** How many requests the entry stands for; null where only another process knows. */
  requests: number | null;
}

/** `waiters` as queue() answered them, their waits measured up to `now` (ms since the epoch). */
function queueRows(waiters: QueuedWaiter[], now: number): QueueRow[] {
  return waiters.map((waiter, index) => ({
    position: index + 1,
    owner: waiter.owner ?? null,
    since: waiter.since?.toISOString() ?? null,
    waitingMs: waiter.since ? Math.max(0, now - waiter.since.getTime()) : null,
    requests: waiter.requests ?? null,
  }));
}

/** `queue` (null when not read) and, when null, `queueNote` saying why. */
export type QueueDetail = { queue: QueueRow[] } | { queue: null; queueNote: string };

/**
 * A lock's queue, up to `limit` entries, within the provider's callTimeoutMs. One that cannot be
 * read (no queue() on the provider, Redlock's refusal, an outage) is a note saying why, with any
 * secret masked: the rest of what the caller shows stands.
 */
export async function readQueue(
  provider: LockProvider,
  name: string,
  limit: number,
  now: () => number = Date.now,
): Promise<QueueDetail> {
  if (!provider.queue) return { queue: null, queueNote: `the ${provider.backend} provider has no queue()` };
  let waiters: QueuedWaiter[];
  try {
    waiters = await provider.queue(name, { limit });
  } catch (error) {
    const why =
      error instanceof FencekitError ? `${error.message} [${error.code}]` : 'the queue could not be read';
    return { queue: null, queueNote: processSecrets.text(why) };
  }
  return { queue: queueRows(waiters, now()) };
}
