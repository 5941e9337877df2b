import type { ZkClient } from './wire/client.js';
import { Code, ZkError, zkCode } from './wire/codes.js';
import { type ACL, CreateMode, OPEN_ACL_UNSAFE } from './wire/ops.js';

/** Walks down to a folder, when a node on the way is deleted again meanwhile, at most this often. */
const MAX_WALKS = 5;
/** Sends of one folder's create: a refused container, then persistent ones cut off by that refusal. */
const MAX_SENDS = 4;

export interface Folder {
  path: string;
  /** The folder's own data (a semaphore's limit); its ancestors are empty. */
  data: Buffer;
  /** The folder's own ACL; its ancestors are open to all, as the Java client's mkdirp makes them. */
  acl: readonly ACL[];
}

/**
 * The folders that hold recipe nodes (a lock's `<root>/<name>`, a semaphore's `locks` and `leases`,
 * and every ancestor we have to make) are container nodes, as Curator's
 * `creatingParentContainersIfNeeded` makes them: the server deletes one once it has had children
 * and has none left (ZooKeeper 3.5.1 and later, at its `znode.container.checkIntervalMs`), so a
 * folder is removed even when nobody releases in it again (a process that died, requests that gave up).
 * A server without containers answers UNIMPLEMENTED and closes the connection: the maker
 * remembers that for every session of its provider and makes persistent folders from then on, as
 * the provider's linger deletion alone removes them.
 */
export class FolderMaker {
  /** Whether the servers make containers; undefined until one answered. */
  #containers: boolean | undefined;

  get containers(): boolean | undefined {
    return this.#containers;
  }

  /**
   * Makes the folder and its missing ancestors. An existing node is fine. A node on the way that
   * goes again before its child is made (an empty container the server removed, another client's
   * linger deletion) makes it walk down again; rejects with the server's error otherwise.
   */
  async ensure(client: ZkClient, folder: Folder, signal: AbortSignal): Promise<void> {
    const ancestors = ancestorsOf(folder.path);
    for (let walk = 0; walk < MAX_WALKS; walk++) {
      // The ancestors usually exist (a name used before, a semaphore's leases beside its locks):
      // one create, and the walk down from the top only when it answers NO_NODE.
      if (await this.#made(client, folder, signal, ancestors.length > 0)) return;
      for (const path of ancestors) {
        if (!(await this.#made(client, { path, data: EMPTY, acl: OPEN_ACL_UNSAFE }, signal, true))) break;
      }
    }
    throw new ZkError(
      Code.NO_NODE,
      folder.path,
      `its parent went again ${MAX_WALKS} times while it was made`,
    );
  }

  /**
   * Makes one folder: a container where the servers have them, else a persistent node. After a
   * refused container, the persistent create may go out on the connection the refusal closes: it
   * is sent again on the next one (one that did make it answers NODE_EXISTS, which callers take as
   * made).
   */
  async create(client: ZkClient, folder: Folder, signal: AbortSignal): Promise<void> {
    let refusedHere = false;
    for (let send = 1; ; send++) {
      const container = this.#containers !== false;
      try {
        if (container) await client.createContainer(folder.path, folder.data, folder.acl, { signal });
        else await client.create(folder.path, folder.data, folder.acl, CreateMode.PERSISTENT, { signal });
        if (container) this.#containers = true;
        return;
      } catch (error) {
        const code = zkCode(error);
        if (container && code === 'UNIMPLEMENTED') {
          this.#containers = false; // a server older than 3.5.1: persistent folders from now on
          refusedHere = true;
          continue;
        }
        const cutByRefusal = refusedHere && code === 'CONNECTION_LOSS';
        if (!cutByRefusal || send >= MAX_SENDS || signal.aborted) throw error;
      }
    }
  }

  /** true once the folder exists; false when its parent does not (and noParentIsExpected). */
  async #made(client: ZkClient, folder: Folder, signal: AbortSignal, noParentIsExpected: boolean) {
    try {
      await this.create(client, folder, signal);
      return true;
    } catch (error) {
      const code = zkCode(error);
      if (code === 'NODE_EXISTS') return true;
      if (code === 'NO_NODE' && noParentIsExpected && !signal.aborted) return false;
      throw error;
    }
  }
}

const EMPTY = Buffer.alloc(0);

/** '/a/b/c' → ['/a', '/a/b']: the nodes above path, from the top. */
function ancestorsOf(path: string): string[] {
  const parts = path.split('/').filter((part) => part !== '');
  return parts.slice(0, -1).map((_, i) => `/${parts.slice(0, i + 1).join('/')}`);
}
