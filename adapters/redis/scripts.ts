import type { Redis } from 'ioredis';

/**
 * The Lua scripts: every step that must not interleave with another client's runs as one script.
 * Keys of one name share the hash tag {name}, so they live on one Redis Cluster slot.
 *
 * The keys of a name (see LockKeys) are passed in this order, each script taking the ones it uses:
 * KEYS[1] lock  KEYS[2] queue  KEYS[3] waiters  KEYS[4] fence  — release and leave: KEYS[4] channel.
 * Times come from the server's TIME, never the client's clock.
 */

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** ours(value, ownerToken): whether a lock value belongs to that grant. */
const OURS = `
local function ours(value, id)
  return value and string.sub(value, 1, #id + 1) == id .. ' '
end
`;

/** Waiters that stopped refreshing their place (crashed, cut off) leave the queue. */
const PRUNE = `
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, id in ipairs(dead) do
  redis.call('LREM', KEYS[2], 0, id)
  redis.call('ZREM', KEYS[3], id)
end
`;

/**
 * ARGV: 1 ownerToken  2 ttlMs  3 owner text  4 wait ('1'/'0')  5 fair ('1'/'0')  6 waiter TTL ms.
 * Returns the fencing token (string) when granted, else −(ms until the current grant expires), at
 * most −1 (and, when waiting, our place is kept or refreshed). A grant that already exists for
 * ownerToken (the reply of an earlier call was lost) is returned as it is: the caller adopts it
 * instead of waiting for its own orphan. A free key with nobody queued takes the short path.
 */
export const ACQUIRE = `${OURS}
local me = ARGV[1]
local held = redis.call('GET', KEYS[1])
if ours(held, me) then return string.match(held, '^%S+ (%d+)') end
${NOW}
local function grant()
  local token = redis.call('INCR', KEYS[4])
  redis.call('SET', KEYS[1], me .. ' ' .. token .. ' ' .. now .. ' ' .. ARGV[3], 'PX', ARGV[2])
  return tostring(token)
end
if not held and redis.call('EXISTS', KEYS[2]) == 0 then return grant() end
${PRUNE}
local first = redis.call('LINDEX', KEYS[2], 0)
if not held and (ARGV[5] == '0' or first == false or first == me) then
  redis.call('LREM', KEYS[2], 1, me)
  redis.call('ZREM', KEYS[3], me)
  return grant()
end
if ARGV[4] == '1' then
  local expiry = now + tonumber(ARGV[6])
  if redis.call('ZADD', KEYS[3], expiry, me) == 1 then
    redis.call('RPUSH', KEYS[2], me)
  end
  -- The queue keys vanish by themselves once nobody refreshes them.
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[6]) * 2)
  redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[6]) * 2)
end
return -math.max(redis.call('PTTL', KEYS[1]), 1)
`;

/**
 * Tells the first waiter it is next. Nobody queued means nobody listens: every waiter queues
 * before it subscribes, and one whose place lapsed polls.
 */
const ANNOUNCE = `
local nextId = redis.call('LINDEX', KEYS[2], 0)
if nextId then redis.call('PUBLISH', KEYS[4], nextId) end
`;

/** ARGV: 1 ownerToken. Compare-and-delete, then announce the next waiter. 1 = deleted, 0 = not ours. */
export const RELEASE = `${OURS}
if not ours(redis.call('GET', KEYS[1]), ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
${ANNOUNCE}
return 1
`;

/** ARGV: 1 ownerToken  2 ttlMs. Compare-and-PEXPIRE. */
export const RENEW = `${OURS}
if not ours(redis.call('GET', KEYS[1]), ARGV[1]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

/** ARGV: 1 ownerToken. Leaves the queue; if the lock is free, wakes whoever is first now. */
export const LEAVE = `
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
${ANNOUNCE}
end
return 1
`;

/** Returns { pttl, token, owner, since, live waiters } (nil fields when nobody holds the key). */
export const INSPECT = `${NOW}
${PRUNE}
local held = redis.call('GET', KEYS[1])
local token, since, owner
if held then token, since, owner = string.match(held, '^%S+ (%d+) (%d+) (.*)$') end
return { redis.call('PTTL', KEYS[1]), token or false, owner or false, since or false,
  redis.call('ZCOUNT', KEYS[3], now, '+inf') }
`;

/** KEYS[1] fence. ARGV: 1 token. Raises the fence counter to at least token (Redlock: see redlock.ts). */
export const RAISE_FENCE = `
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`;

/** The keys of one name, all on the hash tag {name}. */
export interface LockKeys {
  /** "ownerToken token since owner-text", PX ttl: one key says who holds it, so a grant is one SET. */
  lock: string;
  /** The fencing counter (INCR). */
  fence: string;
  /** The waiting ownerTokens, FIFO. */
  queue: string;
  /** ownerToken → expiry by the server's clock: waiters that stop refreshing drop out. */
  waiters: string;
  /** Release notices: the next waiter's ownerToken. */
  channel: string;
}

export function lockKeys(prefix: string, name: string): LockKeys {
  const tag = `${prefix}{${name}}`;
  return {
    lock: `${tag}:lock`,
    fence: `${tag}:fence`,
    queue: `${tag}:queue`,
    waiters: `${tag}:waiters`,
    channel: `${tag}:released`,
  };
}

export interface AcquireArgs {
  ownerToken: string;
  ttlMs: number;
  owner: string;
  wait: boolean;
  fair: boolean;
  waiterTtlMs: number;
}

/** inspect's answer: [pttl, token, owner, since, live waiters]. */
export type InspectAnswer = [number, string | null, string | null, string | null, number];

type Call = (...args: Array<string | number>) => Promise<unknown>;

/** The scripts as commands of one client (EVALSHA, loaded on first use); each sends only its keys. */
export class LockScripts {
  readonly redis: Redis;
  readonly #commands: Record<string, Call>;

  constructor(redis: Redis) {
    this.redis = redis;
    const define = (name: string, numberOfKeys: number, lua: string): void => {
      redis.defineCommand(name, { numberOfKeys, lua });
    };
    define('fencekitAcquire', 4, ACQUIRE);
    define('fencekitRelease', 4, RELEASE);
    define('fencekitRenew', 1, RENEW);
    define('fencekitLeave', 4, LEAVE);
    define('fencekitInspect', 3, INSPECT);
    define('fencekitRaiseFence', 1, RAISE_FENCE);
    this.#commands = redis as unknown as Record<string, Call>;
  }

  /** The fencing token (string) when granted, else −(ms until the current grant expires). */
  acquire(k: LockKeys, a: AcquireArgs): Promise<string | number> {
    return this.#run(
      'fencekitAcquire',
      k.lock,
      k.queue,
      k.waiters,
      k.fence,
      a.ownerToken,
      a.ttlMs,
      a.owner,
      a.wait ? '1' : '0',
      a.fair ? '1' : '0',
      a.waiterTtlMs,
    ) as Promise<string | number>;
  }

  /** true = deleted, false = not ours (any more). */
  async release(k: LockKeys, ownerToken: string): Promise<boolean> {
    return (await this.#run('fencekitRelease', k.lock, k.queue, k.waiters, k.channel, ownerToken)) === 1;
  }

  async renew(k: LockKeys, ownerToken: string, ttlMs: number): Promise<boolean> {
    return (await this.#run('fencekitRenew', k.lock, ownerToken, ttlMs)) === 1;
  }

  async leave(k: LockKeys, ownerToken: string): Promise<void> {
    await this.#run('fencekitLeave', k.lock, k.queue, k.waiters, k.channel, ownerToken);
  }

  inspect(k: LockKeys): Promise<InspectAnswer> {
    return this.#run('fencekitInspect', k.lock, k.queue, k.waiters) as Promise<InspectAnswer>;
  }

  async raiseFence(k: LockKeys, token: bigint): Promise<void> {
    await this.#run('fencekitRaiseFence', k.fence, token.toString());
  }

  #run(name: string, ...args: Array<string | number>): Promise<unknown> {
    return (this.#commands[name] as Call).apply(this.redis, args);
  }
}
