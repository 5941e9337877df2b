import type { Redis } from 'ioredis';

/**
 * The Lua scripts: every step that must not interleave with another client's runs as one script.
 * Keys of one name share the hash tag {name}, so they live on one Redis Cluster slot.
 *
 * KEYS: 1 lock (value = grant's ownerToken, PX ttl)  2 fence (the counter)  3 info (hash: token,
 * owner, since; same TTL as the lock)  4 queue (list of waiting ownerTokens, FIFO)
 * 5 waiters (zset ownerToken → expiry by the server's clock)  6 channel (release notices).
 * Times come from the server's TIME, never the client's clock.
 */
export const KEY_COUNT = 6;

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** Waiters that stopped refreshing their place (crashed, cut off) leave the queue. */
const PRUNE = `
local dead = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now)
for _, id in ipairs(dead) do
  redis.call('LREM', KEYS[4], 0, id)
  redis.call('ZREM', KEYS[5], id)
end
`;

/**
 * ARGV: 1 ownerToken  2 ttlMs  3 owner text  4 wait ('1'/'0')  5 fair ('1'/'0')  6 waiter TTL ms.
 * Returns the fencing token (string) when granted, else −(ms until the current grant expires), at
 * most −1 (and, when waiting, our place is kept or refreshed). A grant that already exists for ownerToken (the reply of an earlier call was
 * lost) is returned as it is: the caller adopts it instead of waiting for its own orphan.
 */
export const ACQUIRE = `${NOW}
local me = ARGV[1]
if redis.call('GET', KEYS[1]) == me then
  return redis.call('HGET', KEYS[3], 'token')
end
${PRUNE}
local first = redis.call('LINDEX', KEYS[4], 0)
if redis.call('EXISTS', KEYS[1]) == 0 and (ARGV[5] == '0' or first == false or first == me) then
  local ttl = tonumber(ARGV[2])
  redis.call('SET', KEYS[1], me, 'PX', ttl)
  redis.call('LREM', KEYS[4], 1, me)
  redis.call('ZREM', KEYS[5], me)
  local token = redis.call('INCR', KEYS[2])
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'token', token, 'owner', ARGV[3], 'since', now)
  redis.call('PEXPIRE', KEYS[3], ttl)
  return tostring(token)
end
if ARGV[4] == '1' then
  local expiry = now + tonumber(ARGV[6])
  if redis.call('ZADD', KEYS[5], expiry, me) == 1 then
    redis.call('RPUSH', KEYS[4], me)
  end
  -- The queue keys vanish by themselves once nobody refreshes them.
  redis.call('PEXPIRE', KEYS[4], tonumber(ARGV[6]) * 2)
  redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[6]) * 2)
end
return -math.max(redis.call('PTTL', KEYS[1]), 1)
`;

/** Announces who is next: the first waiter, or '' (anyone) when nobody queues. */
const ANNOUNCE = `
local nextId = redis.call('LINDEX', KEYS[4], 0)
redis.call('PUBLISH', KEYS[6], nextId or '')
`;

/** ARGV: 1 ownerToken. Compare-and-delete, then announce the next waiter. 1 = deleted, 0 = not ours. */
export const RELEASE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[3])
${ANNOUNCE}
return 1
`;

/** ARGV: 1 ownerToken  2 ttlMs. Compare-and-PEXPIRE of the lock and its info. */
export const RENEW = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1
`;

/** ARGV: 1 ownerToken. Leaves the queue; if the lock is free, wakes whoever is first now. */
export const LEAVE = `
redis.call('LREM', KEYS[4], 0, ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
${ANNOUNCE}
end
return 1
`;

/** Returns { pttl, token, owner, since, live waiters }. */
export const INSPECT = `${NOW}
${PRUNE}
local info = redis.call('HMGET', KEYS[3], 'token', 'owner', 'since')
return { redis.call('PTTL', KEYS[1]), info[1], info[2], info[3], redis.call('ZCOUNT', KEYS[5], now, '+inf') }
`;

/** ARGV: 1 token. Raises the fence counter to at least token (Redlock: see redlock.ts). */
export const RAISE_FENCE = `
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[2], ARGV[1]) end
return 1
`;

/** A client with the scripts as commands (EVALSHA, loaded on first use). */
export type Scripted = Redis & {
  fkAcquire(...args: Array<string | number>): Promise<string | number>;
  fkRelease(...args: Array<string | number>): Promise<number>;
  fkRenew(...args: Array<string | number>): Promise<number>;
  fkLeave(...args: Array<string | number>): Promise<number>;
  fkInspect(
    ...args: Array<string | number>
  ): Promise<[number, string | null, string | null, string | null, number]>;
  fkRaiseFence(...args: Array<string | number>): Promise<number>;
};

export function withScripts(redis: Redis): Scripted {
  const scripted = redis as Scripted;
  scripted.defineCommand('fkAcquire', { numberOfKeys: KEY_COUNT, lua: ACQUIRE });
  scripted.defineCommand('fkRelease', { numberOfKeys: KEY_COUNT, lua: RELEASE });
  scripted.defineCommand('fkRenew', { numberOfKeys: KEY_COUNT, lua: RENEW });
  scripted.defineCommand('fkLeave', { numberOfKeys: KEY_COUNT, lua: LEAVE });
  scripted.defineCommand('fkInspect', { numberOfKeys: KEY_COUNT, lua: INSPECT });
  scripted.defineCommand('fkRaiseFence', { numberOfKeys: KEY_COUNT, lua: RAISE_FENCE });
  return scripted;
}

/** The six keys of a name, all on the hash tag {name}. */
export function lockKeys(prefix: string, name: string): string[] {
  const tag = `${prefix}{${name}}`;
  return [`${tag}:lock`, `${tag}:fence`, `${tag}:info`, `${tag}:queue`, `${tag}:waiters`, `${tag}:released`];
}
