import { type ZkSession, zkCode } from './client.js';
import { unavailable } from './unavailable.js';

/** Delete retries that are still running, per session (they end with it). */
const retrying = new WeakMap<ZkSession, Map<string, Promise<void>>>();

/**
 * Deletes one of the session's own nodes (a released lock, a cancelled or refused request). The
 * path carries our request's uuid, so no other grant can have it: deleting it any version is safe.
 * When the delete fails (timed out, connection lost) the node may live on under our live session
 * and lock the name for everyone: the session keeps trying, with backoff, until the delete is
 * confirmed or the session ends; if it cannot confirm within one session timeout, it closes the
 * session, whose ephemeral nodes then die with it (the provider opens a new one for later calls).
 * Resolves or rejects with the first attempt; the retries run on behind it.
 */
export async function removeOwned(session: ZkSession, path: string): Promise<void> {
  const running = retrying.get(session)?.get(path);
  if (running) return running;
  try {
    await removeNode(session, path);
  } catch (error) {
    keepRemoving(session, path);
    throw error;
  }
}

/**
 * After a create whose answer was lost: deletes the session's nodes under `parent` whose names start
 * with `prefix` (a uuid of our request, so nobody else's). A listing that fails (the connection still
 * down) is tried again, as the session retries a delete: ZooKeeper answers a session's calls in order,
 * so the first listing answered shows what the lost create made. Until the session ends; if it cannot
 * list within one session timeout it closes the session, whose ephemeral nodes then go with it.
 */
export async function removeOwnedByPrefix(session: ZkSession, parent: string, prefix: string): Promise<void> {
  const giveUpAt = performance.now() + session.sessionTimeoutMs;
  let delay = 100;
  for (;;) {
    if (!session.alive) return; // the session's end removed its nodes
    let children: string[];
    try {
      children = await session.client.getChildren(parent);
    } catch (error) {
      if (zkCode(error) === 'NO_NODE') return;
      if (performance.now() >= giveUpAt) {
        void session.close(); // out of time: end the session on the server too, or the nodes live on
        return;
      }
      await sleep(Math.min(delay * (0.5 + Math.random()), giveUpAt - performance.now()));
      delay = Math.min(delay * 2, 1_000);
      continue;
    }
    const ours = children.filter((name) => name.startsWith(prefix));
    // removeOwned keeps trying each delete that fails.
    await Promise.all(ours.map((name) => removeOwned(session, `${parent}/${name}`).catch(() => undefined)));
    return;
  }
}

/** One attempt to delete the node at path, any version; a node already gone (NO_NODE) counts as deleted. */
export async function removeNode(session: ZkSession, path: string): Promise<void> {
  try {
    await session.client.delete(path, -1);
  } catch (error) {
    if (zkCode(error) !== 'NO_NODE') throw unavailable('deleting the lock node failed', error);
  }
}

/** Paths this session is still trying to delete (for tests and inspection). */
export function pendingRemovals(session: ZkSession): string[] {
  return [...(retrying.get(session)?.keys() ?? [])];
}

function keepRemoving(session: ZkSession, path: string): void {
  let paths = retrying.get(session);
  if (!paths) {
    paths = new Map();
    retrying.set(session, paths);
  }
  if (paths.has(path)) return;
  const loop = retryUntilGone(session, path).finally(() => paths.delete(path));
  paths.set(path, loop);
}

async function retryUntilGone(session: ZkSession, path: string): Promise<void> {
  const giveUpAt = performance.now() + session.sessionTimeoutMs;
  let delay = 100;
  for (;;) {
    if (!session.alive || performance.now() >= giveUpAt) {
      // Written off here, or out of time: end the session on the server too, or the node lives on.
      void session.close();
      return;
    }
    await sleep(Math.min(delay * (0.5 + Math.random()), giveUpAt - performance.now()));
    delay = Math.min(delay * 2, 1_000);
    if (!session.alive) continue;
    try {
      await removeNode(session, path); // NO_NODE counts as done
      return;
    } catch {
      // still unreachable: try again until the deadline
    }
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)).unref());
