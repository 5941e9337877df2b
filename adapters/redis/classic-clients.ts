import { BackendUnavailableError } from '../../src/errors.js';
import type { Script } from './classic-scripts.js';
import { isNodeRedisClient, type NodeRedisClient } from './node-redis.js';

export {
  fenceKeyOf,
  MUTEX_ACQUIRE,
  MUTEX_REFRESH,
  MUTEX_RELEASE,
  RAISE_FENCES,
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

/** When a round of one script on every client is over (see evalRound). */
export interface RoundPlan {
  /** Votes for that decide: the round ends once that many clients voted for, or can no longer. */
  quorum: number;
  /** Whether a client's reply is a vote for. */
  votesFor(reply: unknown): boolean;
  /** A client that has not answered by then is a vote against (its script may still run later). */
  timeoutMs: number;
  /** Ends the round at once with the signal's reason; the caller gives back what may have been set. */
  cancel?: AbortSignal | undefined;
}

/**
 * Runs the script on every client at once and settles as soon as the outcome is known: a quorum
 * voted for, so many voted against that no quorum is left, every client answered, or timeoutMs
 * passed (each client still silent then is a vote against: BackendUnavailableError). A client
 * still silent when a quorum decided earlier is left out of the answers: a hung client costs no
 * round more than its deadline, and none at all while the others decide. No answer throws; only
 * the cancel signal rejects.
 */
export function evalRound<C>(
  clients: ReadonlyArray<C>,
  script: Script,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string | number>,
  plan: RoundPlan,
): Promise<Array<ClientAnswer<C>>> {
  const { cancel } = plan;
  if (cancel?.aborted) return Promise.reject(cancel.reason);
  return new Promise((resolve, reject) => {
    const answers = new Map<number, ClientAnswer<C>>();
    let votesFor = 0;
    let settled = false;
    const finish = (settle: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      cancel?.removeEventListener('abort', onAbort);
      settle();
    };
    const answered = () => clients.flatMap((_, index) => answers.get(index) ?? []);
    const onAbort = () => finish(() => reject(cancel?.reason));
    const timer = setTimeout(
      () =>
        finish(() => {
          const silent = new BackendUnavailableError(`redis: no answer within ${plan.timeoutMs} ms`);
          resolve(clients.map((client, index) => answers.get(index) ?? { client, error: silent }));
        }),
      plan.timeoutMs,
    );
    cancel?.addEventListener('abort', onAbort, { once: true });
    clients.forEach((client, index) => {
      evalOn(client, script, keys, args).then(
        (reply) => {
          answers.set(index, { client, reply });
          if (plan.votesFor(reply)) votesFor++;
          decide();
        },
        (error: unknown) => {
          answers.set(index, { client, error: error instanceof Error ? error : new Error(String(error)) });
          decide();
        },
      );
    });
    function decide(): void {
      const against = answers.size - votesFor;
      const decided =
        votesFor >= plan.quorum || against > clients.length - plan.quorum || answers.size === clients.length;
      if (decided) finish(() => resolve(answered()));
    }
  });
}

function isNoScript(error: unknown): boolean {
  return String((error as Error | undefined)?.message ?? error).includes('NOSCRIPT');
}
