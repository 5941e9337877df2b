import type { Cluster, Redis } from 'ioredis';
import { RECIPE_LUA } from './recipe-lua.js';
import { RecipeScripts } from './script-commands.js';

/**
 * The read-write lock's Lua scripts. Keys of one name share the hash tag {name} (one Redis Cluster
 * slot) and sit beside the lock and semaphore keys under ':rw:', so that a lock, a semaphore and a
 * read-write lock of one name never meet. Times come from the server's TIME only.
 *
 * KEYS[1] readers  ZSET ownerToken → lease expiry in server ms
 * KEYS[2] writer   ZSET ownerToken → lease expiry (one member at most)
 * KEYS[3] grants   HASH ownerToken → "token[:lockDelayMs] since owner-text"; lives as long as the
 *                  latest lease, so it exists exactly while the name is held (list() looks for it)
 * KEYS[4] fence    the fencing counter (INCR), never expires
 * KEYS[5] queue    LIST of waiting ownerTokens, FIFO, readers and writers together
 * KEYS[6] waiters  ZSET ownerToken → expiry of its place (live waiters refresh it when they poll)
 * KEYS[7] pending  HASH ownerToken → "mode ttlMs[:lockDelayMs] channel-length channel owner-text":
 *                  what a release needs to grant that waiter and to tell it so
 * KEYS[8] read-delays   ZSET ownerToken → lease expiry + lock-delay, of the reads that asked for one
 * KEYS[9] write-delays  ZSET ownerToken → the same of writes (recipe-delay.ts)
 *
 * Lock-delay: a grant that asked for one has a member in read-delays or write-delays, scored by its
 * lease expiry + the delay and moved with every renewal; a release removes it. When the lease runs
 * out unrenewed (the grant is lost), the member stays until its score: a write's keeps out readers
 * and writers, a read's keeps out writers (a live grant's member changes nothing: it blocks as the
 * holder it is). A release after the loss finds no lease and leaves the member.
 *
 * Every script first drops lapsed leases and places, then grants the head of the queue what is
 * free now (handOver): so after each script the queue's head is blocked (by a writer for a read, by
 * any holder for a write), and a newcomer is granted only when the queue is empty. A waiting writer
 * therefore blocks every reader who asks after it.
 */
const PRELUDE = `${RECIPE_LUA}
local function dropGrant(id)
  local dropped = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
  return redis.call('HDEL', KEYS[3], id) + dropped > 0
end

local function latest(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
  return last and tonumber(last) or 0
end

-- The holder keys live as long as the latest lease: a name nobody renews vanishes by itself.
local function keepHolders()
  local until_ = math.max(latest(KEYS[1]), latest(KEYS[2]))
  if until_ <= now then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
    return
  end
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], until_ - now) end
end

local function holdersKey(mode)
  if mode == 'write' then return KEYS[2] end
  return KEYS[1]
end

-- The lock-delay members of mode's grants: holders key KEYS[i] has its delays in KEYS[i + 7].
local function delaysKey(mode)
  if mode == 'write' then return KEYS[9] end
  return KEYS[8]
end

local function grant(id, mode, ttl, owner, delay)
  local token = nextToken()
  redis.call('ZADD', holdersKey(mode), now + ttl, id)
  redis.call('HSET', KEYS[3], id, withDelay(token, delay) .. ' ' .. now .. ' ' .. owner)
  if delay > 0 then addDelay(delaysKey(mode), id, now + ttl + delay) end
  keepHolders()
  return token
end

-- Extends the lease of id in holders key KEYS[i] (1 read, 2 write) to ttl, and its delay with it.
local function extend(id, i, ttl)
  redis.call('ZADD', KEYS[i], 'XX', now + ttl, id)
  local delay = delayOf(redis.call('HGET', KEYS[3], id))
  if delay > 0 then addDelay(KEYS[i + 7], id, now + ttl + delay) end
  keepHolders()
end

-- Whether a request of mode fits beside the holders and the delays of lost grants (not the queue:
-- the caller knows its place). A delay member of a live grant blocks no more than its holder does.
local function fits(mode)
  if redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[9]) > 0 then return false end
  return mode == 'read' or redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[8]) == 0
end

-- Grants, in queue order, the waiters that fit now (no overtaking: stops at the first that does
-- not, and after a write), each by handTo.
local function handOver()
  while true do
    local id = redis.call('LINDEX', KEYS[5], 0)
    if not id then return end
    local spec = redis.call('HGET', KEYS[7], id)
    if not spec then
      -- Its spec was lost (evicted): drop the place, or it would block the queue; a live waiter
      -- queues again at its next poll.
      unqueue(id)
    else
      local mode, ttl, delay, length, rest = string.match(spec, '^(%a+) (%d+):?(%d*) (%d+) (.*)$')
      if not fits(mode) then return end
      handTo(id, { ttl, delay, length, rest }, function(leaseMs, owner, delayMs)
        return grant(id, mode, leaseMs, owner, delayMs)
      end)
      if mode == 'write' then return end
    end
  end
end

-- Leases that ran out (lost grants: their delays stay), delays that ended and waiters that stopped
-- refreshing their place are gone.
local function lapse()
  local lapsed = false
  for i = 1, 2 do
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', now)) do
      dropGrant(id)
      lapsed = true
    end
  end
  endDelays(KEYS[8])
  endDelays(KEYS[9])
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)) do unqueue(id) end
  if lapsed then keepHolders() end
end

-- lapse(), and what that frees goes to the head of the queue.
local function settle()
  lapse()
  handOver()
end
`;

/**
 * ARGV: 1 ownerToken  2 ttlMs  3 owner text  4 wait ('1'/'0')  5 mode ('read'/'write')
 * 6 waiter TTL ms  7 the pub/sub channel that reaches this waiter ('' if none)  8 lock-delay ms.
 * Returns the token (string) when granted; else { −(ms until the soonest lease may expire or delay
 * end, at least 1), the fence counter } and, when waiting, our place is kept or refreshed. The
 * counter lets a waiter tell a hand-over notice made after this refusal (higher token) from a stale
 * one. A grant that already exists for ownerToken (a lost reply, or a release granted it to us
 * while we waited) is returned with its lease (and its delay) renewed to ttlMs from now. A queued
 * request is granted only by handOver (in queue order); a newcomer only when nobody is queued.
 */
export const RW_ACQUIRE = `${PRELUDE}
local me, ttl, mode, delay = ARGV[1], tonumber(ARGV[2]), ARGV[5], tonumber(ARGV[8])
settle()
local mine = redis.call('HGET', KEYS[3], me)
if mine then
  for i = 1, 2 do
    if redis.call('ZSCORE', KEYS[i], me) then
      extend(me, i, ttl)
      return string.match(mine, '^(%d+)')
    end
  end
  redis.call('HDEL', KEYS[3], me) -- a record without its lease (evicted): not a grant
end
local queued = redis.call('HGET', KEYS[7], me)
if not queued and not redis.call('LINDEX', KEYS[5], 0) and fits(mode) then
  return grant(me, mode, ttl, ARGV[3], delay)
end
if ARGV[4] == '1' then
  local waiterTtl = tonumber(ARGV[6])
  redis.call('ZADD', KEYS[6], now + waiterTtl, me)
  if not queued then
    redis.call('RPUSH', KEYS[5], me)
    local spec = mode .. ' ' .. withDelay(ttl, delay) .. ' ' .. #ARGV[7] .. ' ' .. ARGV[7]
    redis.call('HSET', KEYS[7], me, spec .. ' ' .. ARGV[3])
  end
  -- The waiting keys vanish by themselves once nobody refreshes them.
  for i = 5, 7 do redis.call('PEXPIRE', KEYS[i], waiterTtl * 2) end
end
local soonest = math.huge
for _, i in ipairs({ 1, 2, 8, 9 }) do
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')[2]
  if first then soonest = math.min(soonest, tonumber(first) - now) end
end
if soonest == math.huge then soonest = 1 end
return { -math.max(soonest, 1), redis.call('GET', KEYS[4]) or false }
`;

/**
 * ARGV: 1 ownerToken. Drops our grant and its delay, or our place (guarded by ownerToken), and
 * grants what that frees to the head of the queue, in the same script. 1 = a grant was dropped,
 * 0 = none was ours. Lapsed leases go first: a release after the loss leaves the delay it started.
 */
export const RW_RELEASE = `${PRELUDE}
local me = ARGV[1]
lapse()
local live = redis.call('ZSCORE', KEYS[1], me) or redis.call('ZSCORE', KEYS[2], me)
local dropped = dropGrant(me)
if live then
  redis.call('ZREM', KEYS[8], me)
  redis.call('ZREM', KEYS[9], me)
end
if dropped then keepHolders() else unqueue(me) end
handOver()
if dropped then return 1 end
return 0
`;

/** ARGV: 1 ownerToken  2 ttlMs. ZADD XX our lease while it has not run out: 1 = extended, 0 = gone. */
export const RW_RENEW = `${PRELUDE}
settle()
for i = 1, 2 do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    extend(ARGV[1], i, tonumber(ARGV[2]))
    return 1
  end
end
return 0
`;

/**
 * { live waiters, { { mode, token, since, owner, expiry }, ... }, { { mode, delay end }, ... } }:
 * no ownerTokens leave Redis. The delays are those of lost grants only.
 */
export const RW_INSPECT = `${PRELUDE}
settle()
local holders, delayed = {}, {}
for i, mode in ipairs({ 'read', 'write' }) do
  local scored = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES')
  for j = 1, #scored, 2 do
    local spec = redis.call('HGET', KEYS[3], scored[j]) or ''
    local token, since, owner = string.match(spec, '^(%d+):?%d* (%d+) (.*)$')
    if token then table.insert(holders, { mode, token, since, owner, scored[j + 1] }) end
  end
  local delays = redis.call('ZRANGE', KEYS[i + 7], 0, -1, 'WITHSCORES')
  for j = 1, #delays, 2 do
    if not redis.call('ZSCORE', KEYS[i], delays[j]) then table.insert(delayed, { mode, delays[j + 1] }) end
  end
end
return { redis.call('ZCARD', KEYS[6]), holders, delayed }
`;

/** The keys of a read-write lock name, in the scripts' order, all on the name's hash tag. */
export function readWriteKeys(prefix: string, name: string): string[] {
  // As lockKeys: a name that starts with '}' gets a space before it, so the tag is never empty.
  const tag = `${prefix}{${name.startsWith('}') ? ' ' : ''}${name}}:rw`;
  const names = ['readers', 'writer', 'grants', 'fence', 'queue', 'waiters', 'pending'];
  return [...names, 'read-delays', 'write-delays'].map((k) => `${tag}:${k}`);
}

/** The suffix of the key that exists exactly while a read-write lock name is held (list()). */
export const READ_WRITE_HELD_SUFFIX = '}:rw:grants';

/** The token when granted, else [−(ms until the soonest lease may expire), the fence counter]. */
export type RwAcquireAnswer = string | [number, string];
/**
 * [live waiters, holders as [mode, token, since ms, owner, expiry ms], lost grants' lock-delays as
 * [mode, end ms]] (the last read as none when missing).
 */
export type RwInspectAnswer = [
  number,
  Array<['read' | 'write', string, string, string, string]>,
  Array<['read' | 'write', string]>?,
];

/** What one acquire script call asks for. */
export interface RwAcquireArgs {
  ownerToken: string;
  ttlMs: number;
  owner: string;
  wait: boolean;
  mode: 'read' | 'write';
  waiterTtlMs: number;
  /** Where a release tells this waiter that it was granted ('' for none). */
  channel: string;
  /** Lock-delay of the grant (ms); default 0, none. */
  lockDelayMs?: number;
}

const RW_LUA = { acquire: RW_ACQUIRE, release: RW_RELEASE, renew: RW_RENEW, inspect: RW_INSPECT };

/** The scripts as commands of one client (EVALSHA, loaded on first use). */
export class ReadWriteScripts extends RecipeScripts<RwInspectAnswer> {
  constructor(redis: Redis | Cluster) {
    super(redis, 'fencekitRw', 9, RW_LUA);
  }

  acquire(keys: string[], a: RwAcquireArgs): Promise<RwAcquireAnswer> {
    const rest = [a.mode, a.waiterTtlMs, a.channel, a.lockDelayMs ?? 0];
    return this.acquireCall(keys, a, rest) as Promise<RwAcquireAnswer>;
  }

  /** true = our grant was dropped; false = none was ours (our place, if any, is gone too). */
  async release(keys: string[], ownerToken: string): Promise<boolean> {
    return (await this.scripts.run(this.command('release'), keys, [ownerToken])) === 1;
  }
}
