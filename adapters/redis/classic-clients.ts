import type { Script } from './classic-scripts.js';
import { isNodeRedisClient, type NodeRedisClient } from './node-redis.js';

export {
  fenceKeyOf,
  MUTEX_ACQUIRE,
  MUTEX_REFRESH,
  MUTEX_RELEASE,
  REDLOCK_ACQUIRE,
  REDLOCK_EXTEND,
  REDLOCK_RELEASE,
  type Script,
  SEMAPHORE_ACQUIRE,
  SEMAPHORE_REFRESH,
  SEMAPHORE_RELEASE,
} from './classic-scripts.js';

/** One client's answer to a script: its reply, or the error it failed with. */
export type ClientAnswer<C> = { client: C; reply: unknown } | { client: C; error: Error };

/**
 * Runs a script on the app's own client as the originals do: EVALSHA, then EVAL on NOSCRIPT. Takes
 * an ioredis client or cluster (what the originals take) or a node-redis client.
 */
export async function evalOn(
  client: unknown,
  script: Script,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string | number>,
): Promise<unknown> {
  const rest = [String(keys.length), ...keys, ...args.map(String)];
  if (isNodeRedisClient(client)) {
    const node = client as NodeRedisClient;
    try {
      return await node.sendCommand(['EVALSHA', script.sha, ...rest]);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return node.sendCommand(['EVAL', script.lua, ...rest]);
    }
  }
  const io = client as {
    evalsha(...args: Array<string | number>): Promise<unknown>;
    eval(...args: Array<string | number>): Promise<unknown>;
  };
  try {
    return await io.evalsha(script.sha, ...rest);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return io.eval(script.lua, ...rest);
  }
}

/** Runs the script on every client at once; each answer is kept, none throws. */
export function evalOnAll<C>(
  clients: ReadonlyArray<C>,
  script: Script,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string | number>,
): Promise<Array<ClientAnswer<C>>> {
  return Promise.all(
    clients.map((client) =>
      evalOn(client, script, keys, args).then(
        (reply) => ({ client, reply }),
        (error: unknown) => ({
          client,
          error: error instanceof Error ? error : new Error(String(error)),
        }),
      ),
    ),
  );
}

function isNoScript(error: unknown): boolean {
  return String((error as Error | undefined)?.message ?? error).includes('NOSCRIPT');
}
