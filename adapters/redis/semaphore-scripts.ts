import type { Cluster, Redis } from 'ioredis';
import { RECIPE_LUA } from './recipe-lua.js';
import { RecipeScripts } from './script-commands.js';

/**
 * The semaphore's Lua scripts. Keys of one name share the hash tag {name} (one Redis
 * Cluster slot) and sit beside the lock keys under ':sem:'. Times come from the server's TIME only.
 *
 * KEYS[1] holders  ZSET "ownerToken#i" (one member per permit, so ZCARD counts permits) → lease
 *                  expiry in server ms; "ownerToken!i" → when a lost grant's lock-delay ends
 * KEYS[2] grants   HASH ownerToken → "permits[:lockDelayMs] token since owner-text"
 * KEYS[3] limit    the limit the name is used with while anyone holds or waits
 * KEYS[4] fence    the fencing counter (INCR), never expires
 * KEYS[5] queue    LIST of waiting ownerTokens, FIFO
 * KEYS[6] waiters  ZSET ownerToken → expiry of its place (live waiters refresh it when they poll)
 * KEYS[7] pending  HASH ownerToken → "permits ttlMs[:lockDelayMs] channel-length channel
 *                  owner-text": what a release needs to grant that waiter its permits and to tell
 *                  it so
 *
 * Lock-delay: the grant's record carries its delay (recipe-delay.ts). When its lease runs out
 * unrenewed (the grant is lost), the script that drops it puts its permits back into the holders
 * ZSET as "ownerToken!i", scored by the lease's expiry + the delay: they count against the limit
 * (ZCARD) and are dropped as any lapsed member is, once the delay has ended. So a name without
 * delays runs no extra command. A release drops the grant ("#" members) at once; a release after
 * the loss finds no grant and leaves the delay. The holder keys live at least ttl * 2 + delay
 * after each grant or renewal, so a lost lease is still there to be found until its delay ends.
 */
const PRELUDE = `${RECIPE_LUA}
local function dropGrant(id)
  local spec = redis.call('HGET', KEYS[2], id)
  if not spec then return false end
  local permits = tonumber(string.match(spec, '^(%d+)'))
  for i = 1, permits do redis.call('ZREM', KEYS[1], id .. '#' .. i) end
  redis.call('HDEL', KEYS[2], id)
  return true
end

-- Keeps the name's keys at least ms longer; they vanish by themselves once nobody uses the name.
local function keep(ms, first, last)
  for i = first, last do
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl >= 0 and pttl < ms then redis.call('PEXPIRE', KEYS[i], ms) end
  end
end

-- A lease that ran out is a lost grant: gone, its permits kept by its lock-delay (if it asked for
-- one) as "ownerToken!i" until the lease's expiry + the delay.
local function lose(id, expiry)
  local spec = redis.call('HGET', KEYS[2], id)
  if not spec then return end
  local permits, delay = tonumber(string.match(spec, '^(%d+)')), delayOf(spec)
  if delay > 0 and expiry + delay > now then
    for i = 1, permits do redis.call('ZADD', KEYS[1], expiry + delay, id .. '!' .. i) end
    keep(expiry + delay - now, 1, 3)
  end
  dropGrant(id)
end

-- Leases that ran out, delays that ended and waiters that stopped refreshing their place are gone.
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES')
for i = 1, #lapsed, 2 do
  local id = string.match(lapsed[i], '^(.*)#%d+$')
  if id then lose(id, tonumber(lapsed[i + 1])) end
  redis.call('ZREM', KEYS[1], lapsed[i]) -- a delay that ended, or a lease whose record was lost
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)) do unqueue(id) end

local function wantOf(id)
  return tonumber(string.match(redis.call('HGET', KEYS[7], id) or '1', '^(%d+)'))
end

-- Whether permits for me fit beside those of every waiter queued before me (FIFO, no overtaking;
-- a newcomer, not queued, comes after all of them), and whether I am queued (true: a fit without
-- finding me looked at the whole queue). Looks at most free + 1 entries.
local function fits(me, permits, limit)
  local free = limit - redis.call('ZCARD', KEYS[1]) - permits
  if free < 0 then return false end
  for _, id in ipairs(redis.call('LRANGE', KEYS[5], 0, free)) do
    if id == me then return true, true end
    free = free - wantOf(id)
    if free < 0 then return false end
  end
  return true, false
end

-- The holder keys outlive a lease by ttl + its delay: a lost lease is found before its delay ends.
local function grant(id, permits, ttl, owner, delay)
  local token = nextToken()
  for i = 1, permits do redis.call('ZADD', KEYS[1], now + ttl, id .. '#' .. i) end
  redis.call('HSET', KEYS[2], id, withDelay(permits, delay) .. ' ' .. token .. ' ' .. now .. ' ' .. owner)
  keep(ttl * 2 + delay, 1, 3)
  return token
end

-- Grants, in queue order, the waiters whose permits fit now (no overtaking: stops at the first
-- that does not), each by handTo (a provisional lease: a waiter that died since its last refresh
-- gets its permits back with that expiry).
local function handOver(limit)
  local free = limit - redis.call('ZCARD', KEYS[1])
  local granted = 0
  while free > 0 do
    local id = redis.call('LINDEX', KEYS[5], 0)
    local spec = id and redis.call('HGET', KEYS[7], id)
    if not spec then return granted end
    local permits, ttl, delay, length, rest = string.match(spec, '^(%d+) (%d+):?(%d*) (%d+) (.*)$')
    permits = tonumber(permits)
    if permits > free then return granted end
    handTo(id, { ttl, delay, length, rest }, function(leaseMs, owner, delayMs)
      return grant(id, permits, leaseMs, owner, delayMs)
    end)
    free = free - permits
    granted = granted + 1
  end
  return granted
end
`;

/**
 * ARGV: 1 ownerToken  2 ttlMs  3 owner text  4 wait ('1'/'0')  5 limit  6 permits  7 waiter TTL ms
 * 8 the pub/sub channel that reaches this waiter ('' if none)  9 lock-delay ms (0 = none).
 * Returns the token (string) when granted; { 'limit', stored } when the name has another limit;
 * else { −(ms until the next lease expires or delay ends, at least 1), the fence counter } and,
 * when waiting, our place is kept. The counter lets a waiter tell a hand-over notice made after
 * this refusal (higher token) from a stale one. A grant that already exists for ownerToken (a lost
 * reply, or a release granted it to us while we waited) is returned with its lease renewed to
 * ttlMs from now.
 * Granted only at the head of the queue (or with nobody queued): FIFO, all permits or none.
 */
export const SEM_ACQUIRE = `${PRELUDE}
local me, ttl, limit, permits = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[5]), tonumber(ARGV[6])
local delay = tonumber(ARGV[9])
local stored = redis.call('GET', KEYS[3])
if stored and tonumber(stored) ~= limit then return { 'limit', stored } end
local function renewed()
  local mine = redis.call('HGET', KEYS[2], me)
  if not mine then return false end
  local count, token = string.match(mine, '^(%d+):?%d* (%d+)')
  for i = 1, tonumber(count) do redis.call('ZADD', KEYS[1], 'XX', now + ttl, me .. '#' .. i) end
  keep(ttl * 2 + delayOf(mine), 1, 3)
  return token
end
local token = renewed()
if token then return token end
local fit, queued = fits(me, permits, limit)
if fit then
  if queued then unqueue(me) end
  local token = grant(me, permits, ttl, ARGV[3], delay)
  if not stored then redis.call('SET', KEYS[3], limit, 'PX', ttl * 2) end
  return token
end
if ARGV[4] == '1' then
  local waiterTtl = tonumber(ARGV[7])
  if redis.call('ZADD', KEYS[6], now + waiterTtl, me) == 1 then
    redis.call('RPUSH', KEYS[5], me)
    local spec = permits .. ' ' .. withDelay(ttl, delay) .. ' ' .. #ARGV[8] .. ' ' .. ARGV[8]
    redis.call('HSET', KEYS[7], me, spec .. ' ' .. ARGV[3])
  end
  if not stored then redis.call('SET', KEYS[3], limit, 'PX', waiterTtl * 2) end
  keep(waiterTtl * 2, 3, 3)
  for i = 5, 7 do redis.call('PEXPIRE', KEYS[i], waiterTtl * 2) end
  -- Permits freed by an expiry (found by this look) go to whoever is first, granted in place.
  if handOver(limit) > 0 then
    token = renewed()
    if token then return token end
  end
end
local soonest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
return { -math.max(soonest and (tonumber(soonest) - now) or 1, 1), redis.call('GET', KEYS[4]) or false }
`;

/**
 * ARGV: 1 ownerToken  2 limit. Drops our grant or our place (guarded by ownerToken) and grants the
 * freed permits to the first waiters, in the same script.
 */
export const SEM_RELEASE = `${PRELUDE}
-- A holder has left the queue (granted in the same script that unqueued it).
local dropped = dropGrant(ARGV[1])
if not dropped then unqueue(ARGV[1]) end
handOver(tonumber(redis.call('GET', KEYS[3]) or ARGV[2]))
if dropped then return 1 end
return 0
`;

/** ARGV: 1 ownerToken  2 ttlMs. ZADD XX every member of our grant while it has not run out. */
export const SEM_RENEW = `${PRELUDE}
local mine = redis.call('HGET', KEYS[2], ARGV[1])
if not mine then return 0 end
local ttl = tonumber(ARGV[2])
for i = 1, tonumber(string.match(mine, '^(%d+)')) do
  redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1] .. '#' .. i)
end
keep(ttl * 2 + delayOf(mine), 1, 3)
return 1
`;

/**
 * { live waiters, { { permits, token, since, owner, expiry }, ... }, { { permits, delay end }, ... } }:
 * no ownerTokens leave Redis.
 */
export const SEM_INSPECT = `${PRELUDE}
local holders = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local id, spec = all[i], all[i + 1]
  local permits, token, since, owner = string.match(spec, '^(%d+):?%d* (%d+) (%d+) (.*)$')
  local expiry = redis.call('ZSCORE', KEYS[1], id .. '#1')
  table.insert(holders, { permits, token, since, owner, expiry or '0' })
end
local delayed, byGrant = {}, {}
local scored = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #scored, 2 do
  local id = string.match(scored[i], '^(.*)!%d+$')
  if id and not byGrant[id] then
    byGrant[id] = { 0, scored[i + 1] }
    table.insert(delayed, byGrant[id])
  end
  if id then byGrant[id][1] = byGrant[id][1] + 1 end
end
return { redis.call('ZCARD', KEYS[6]), holders, delayed }
`;

/** The keys of a semaphore name, all on the name's hash tag. */
export function semaphoreKeys(prefix: string, name: string): string[] {
  const tag = `${prefix}{${name.startsWith('}') ? ' ' : ''}${name}}:sem`;
  return ['holders', 'grants', 'limit', 'fence', 'queue', 'waiters', 'pending'].map((k) => `${tag}:${k}`);
}

/** Refused: [−(ms until the next lease may expire), the fence counter], or ['limit', the stored limit]. */
export type SemAcquireAnswer = string | [number, string] | ['limit', string];
/**
 * [live waiters, holders as [permits, token, since ms, owner, expiry ms], lock-delays as [permits,
 * end ms]] (the last read as none when missing).
 */
export type SemInspectAnswer = [
  number,
  Array<[string, string, string, string, string]>,
  Array<[number, string]>?,
];

const SEM_LUA = { acquire: SEM_ACQUIRE, release: SEM_RELEASE, renew: SEM_RENEW, inspect: SEM_INSPECT };

/** The scripts as commands of one client (EVALSHA, loaded on first use). */
export class SemaphoreScripts extends RecipeScripts<SemInspectAnswer> {
  constructor(redis: Redis | Cluster) {
    super(redis, 'fencekitSem', 7, SEM_LUA);
  }

  acquire(
    keys: string[],
    a: {
      ownerToken: string;
      ttlMs: number;
      owner: string;
      wait: boolean;
      limit: number;
      permits: number;
      lockDelayMs?: number;
    },
    waiterTtlMs: number,
    channel: string,
  ): Promise<SemAcquireAnswer> {
    const rest = [a.limit, a.permits, waiterTtlMs, channel, a.lockDelayMs ?? 0];
    return this.acquireCall(keys, a, rest) as Promise<SemAcquireAnswer>;
  }

  async release(keys: string[], ownerToken: string, limit: number): Promise<boolean> {
    return (await this.scripts.run(this.command('release'), keys, [ownerToken, limit])) === 1;
  }
}
