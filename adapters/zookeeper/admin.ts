import { decodeHolder } from '../../src/holder-record.js';
import type { HolderInfo } from '../../src/types.js';
import { type ZkSession, zkCode } from './client.js';
import { MARKER_NAME, stampAfterRemoval } from './lock-delay.js';
import { type NodeKind, queueOrder } from './mutex.js';
import { unavailable } from './unavailable.js';

/** Folders list() looks into at most: bounded however many names the tree holds. */
const MAX_FOLDERS = 10_000;
/** A semaphore's two folders, its mutex and its leases (Curator's InterProcessSemaphoreV2 layout). */
const SEMAPHORE_FOLDERS: ReadonlySet<string> = new Set(['locks', 'leases']);
/** The nodes whose queue has a holder whenever it has a node: a lock's, a read-write lock's. */
const HELD_KINDS: readonly NodeKind[] = ['lock-', '__READ__', '__WRIT__'];
/** A node of a lock, latch or semaphore queue (Curator's protected names), as opposed to a folder. */
const QUEUE_NODE = /^_c_[0-9a-f-]{36}-/;

/** Reads through the leader: a multi (even a lone check) makes this session's server catch up first. */
async function catchUp(session: ZkSession): Promise<void> {
  await session.client.multi([{ op: 'check', path: '/', version: -1 }]);
}

/** The queues a force-release ends the head of: a lock's, an election's (its leader). */
const FORCIBLE_KINDS: readonly NodeKind[] = ['lock-', 'latch-'];

/**
 * Deletes the head of `parent`'s lock (or election) queue if its czxid is `expected` (or whatever
 * it is). The node's path is unique to its grant (uuid and sequence), so deleting that path can never
 * remove a grant made after the read; the holder's own-node watch aborts its signal with 'revoked'.
 * A lock-delay marker the grant wrote is stamped at once (lock-delay.ts), so the delay starts now.
 */
export async function removeHead(
  session: ZkSession,
  parent: string,
  expected: bigint | undefined,
): Promise<HolderInfo | null> {
  try {
    await catchUp(session);
    const children = await session.client.getChildren(parent);
    const [head] = queueOrder(children, FORCIBLE_KINDS);
    if (!head) return null;
    const path = `${parent}/${head.name}`;
    const { data, stat } = await session.client.getData(path);
    if (expected !== undefined && stat.czxid !== expected) return null;
    await session.client.delete(path, -1);
    if (children.includes(MARKER_NAME)) {
      // Best effort: the next head stamps it anyway.
      await stampAfterRemoval(session, parent, head.name).catch(() => undefined);
    }
    return { ...decodeHolder(data), fencingToken: stat.czxid }; // an election's proposal reads as owner
  } catch (error) {
    if (zkCode(error) === 'NO_NODE') return null; // no such name, or released meanwhile
    throw unavailable('force-release failed', error);
  }
}

/**
 * The names under `prefix` whose folder has a lock or read-write lock queue (its head holds the
 * name): a walk of the folders below `root` ('' = the tree's root), looking only into folders that
 * can lead to a name under prefix.
 */
export async function heldNamesWalk(session: ZkSession, root: string, prefix: string): Promise<string[]> {
  const names: string[] = [];
  const folders: Array<{ path: string; name: string }> = [{ path: root, name: '' }];
  try {
    await catchUp(session);
    for (let visited = 0; visited < MAX_FOLDERS; visited++) {
      const folder = folders.shift();
      if (!folder) break;
      let children: string[];
      try {
        children = await session.client.getChildren(folder.path === '' ? '/' : folder.path);
      } catch (error) {
        if (zkCode(error) === 'NO_NODE') continue; // deleted while we walked
        throw error;
      }
      if (folder.name !== '' && queueOrder(children, HELD_KINDS).length > 0) names.push(folder.name);
      for (const child of children) {
        if (QUEUE_NODE.test(child)) continue;
        // A semaphore's folders, not lock names: validateKey refuses them after a first segment.
        if (folder.name !== '' && SEMAPHORE_FOLDERS.has(child)) continue;
        const name = folder.name === '' ? child : `${folder.name}/${child}`;
        if (name.startsWith(prefix) || prefix.startsWith(`${name}/`)) {
          folders.push({ path: `${folder.path}/${child}`, name });
        }
      }
    }
  } catch (error) {
    throw unavailable('list failed', error);
  }
  return names;
}
