import type { Cluster, Redis } from 'ioredis';
import { ScriptCommands } from './script-commands.js';

/**
 * The read-write lock's Lua scripts. Keys of one name share the hash tag {name} (one Redis Cluster
 * slot) and sit beside the lock and semaphore keys under ':rw:', so that a lock, a semaphore and a
 * read-write lock of one name never meet. Times come from the server's TIME only.
 *
 * KEYS[1] readers  ZSET ownerToken → lease expiry in server ms
 * KEYS[2] writer   ZSET ownerToken → lease expiry (one member at most)
 * KEYS[3] grants   HASH ownerToken → "token since owner-text"; lives as long as the latest lease,
 *                  so it exists exactly while the name is held (list() looks for it)
 * KEYS[4] fence    the fencing counter (INCR), never expires
 * KEYS[5] queue    LIST of waiting ownerTokens, FIFO, readers and writers together
 * KEYS[6] waiters  ZSET ownerToken → expiry of its place (live waiters refresh it when they poll)
 * KEYS[7] pending  HASH ownerToken → "mode ttlMs channel-length channel owner-text": what a
 *                  release needs to grant that waiter and to tell it so
 *
 * Every script first drops lapsed leases and places, then grants the head of the queue what is
 * free now (handOver): so after each script the queue's head is blocked (by a writer for a read, by
 * any holder for a write), and a newcomer is granted only when the queue is empty. A waiting writer
 * therefore blocks every reader who asks after it.
 */
const PRELUDE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function unqueue(id)
  redis.call('LREM', KEYS[5], 0, id)
  redis.call('ZREM', KEYS[6], id)
  redis.call('HDEL', KEYS[7], id)
end

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

-- A new fencing token. A counter Redis lost (restart without AOF, eviction) restarts past every
-- token it gave: at the server's TIME in microseconds.
local function nextToken()
  local token = redis.call('INCR', KEYS[4])
  if token == 1 then
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[4], string.format('%.0f', token))
  end
  return string.format('%.0f', token)
end

local function holdersKey(mode)
  if mode == 'write' then return KEYS[2] end
  return KEYS[1]
end

local function grant(id, mode, ttl, owner)
  local token = nextToken()
  redis.call('ZADD', holdersKey(mode), now + ttl, id)
  redis.call('HSET', KEYS[3], id, token .. ' ' .. now .. ' ' .. owner)
  keepHolders()
  return token
end

-- Whether a request of mode fits beside the holders (not the queue: the caller knows its place).
local function fits(mode)
  if redis.call('ZCARD', KEYS[2]) > 0 then return false end
  return mode == 'read' or redis.call('ZCARD', KEYS[1]) == 0
end

-- Grants, in queue order, the waiters that fit now (no overtaking: stops at the first that does
-- not, and after a write) and tells each "ownerToken token" on its channel, so a hand-over costs
-- the waiter no round trip. Provisional: the lease lasts no longer than the waiter's place would
-- have (it may have died since its last refresh); the waiter extends it to its ttl once it takes
-- it. A lost notice costs the waiter a poll, whose attempt finds the grant.
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
      local mode, ttl, length, rest = string.match(spec, '^(%a+) (%d+) (%d+) (.*)$')
      if not fits(mode) then return end
      local channel = string.sub(rest, 1, tonumber(length))
      local owner = string.sub(rest, tonumber(length) + 2)
      ttl = tonumber(ttl)
      local alive = tonumber(redis.call('ZSCORE', KEYS[6], id) or 0) - now
      if alive > 0 and alive < ttl then ttl = math.floor(alive) end
      unqueue(id)
      local token = grant(id, mode, ttl, owner)
      if channel ~= '' then redis.call('PUBLISH', channel, id .. ' ' .. token) end
      if mode == 'write' then return end
    end
  end
end

-- Leases that ran out and waiters that stopped refreshing their place are gone; what that frees
-- goes to the head of the queue.
local function settle()
  local lapsed = false
  for i = 1, 2 do
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', now)) do
      dropGrant(id)
      lapsed = true
    end
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)) do unqueue(id) end
  if lapsed then keepHolders() end
  handOver()
end
`;

/**
 * ARGV: 1 ownerToken  2 ttlMs  3 owner text  4 wait ('1'/'0')  5 mode ('read'/'write')
 * 6 waiter TTL ms  7 the pub/sub channel that reaches this waiter ('' if none).
 * Returns the token (string) when granted; else { −(ms until the soonest lease may expire, at least
 * 1), the fence counter } and, when waiting, our place is kept or refreshed. The counter lets a
 * waiter tell a hand-over notice made after this refusal (higher token) from a stale one. A grant
 * that already exists for ownerToken (a lost reply, or a release granted it to us while we waited)
 * is returned with its lease renewed to ttlMs from now. A queued request is granted only by
 * handOver (in queue order); a newcomer only when nobody is queued.
 */
export const RW_ACQUIRE = `${PRELUDE}
local me, ttl, mode = ARGV[1], tonumber(ARGV[2]), ARGV[5]
settle()
local mine = redis.call('HGET', KEYS[3], me)
if mine then
  for i = 1, 2 do
    if redis.call('ZSCORE', KEYS[i], me) then
      redis.call('ZADD', KEYS[i], 'XX', now + ttl, me)
      keepHolders()
      return string.match(mine, '^(%d+)')
    end
  end
  redis.call('HDEL', KEYS[3], me) -- a record without its lease (evicted): not a grant
end
local queued = redis.call('HGET', KEYS[7], me)
if not queued and not redis.call('LINDEX', KEYS[5], 0) and fits(mode) then
  return grant(me, mode, ttl, ARGV[3])
end
if ARGV[4] == '1' then
  local waiterTtl = tonumber(ARGV[6])
  redis.call('ZADD', KEYS[6], now + waiterTtl, me)
  if not queued then
    redis.call('RPUSH', KEYS[5], me)
    redis.call('HSET', KEYS[7], me, mode .. ' ' .. ttl .. ' ' .. #ARGV[7] .. ' ' .. ARGV[7] .. ' ' .. ARGV[3])
  end
  -- The waiting keys vanish by themselves once nobody refreshes them.
  for i = 5, 7 do redis.call('PEXPIRE', KEYS[i], waiterTtl * 2) end
end
local soonest = math.huge
for i = 1, 2 do
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')[2]
  if first then soonest = math.min(soonest, tonumber(first) - now) end
end
if soonest == math.huge then soonest = 1 end
return { -math.max(soonest, 1), redis.call('GET', KEYS[4]) or '0' }
`;

/**
 * ARGV: 1 ownerToken. Drops our grant or our place (guarded by ownerToken) and grants what that
 * frees to the head of the queue, in the same script. 1 = a grant was dropped, 0 = none was ours.
 */
export const RW_RELEASE = `${PRELUDE}
local dropped = dropGrant(ARGV[1])
if dropped then keepHolders() else unqueue(ARGV[1]) end
settle()
if dropped then return 1 end
return 0
`;

/** ARGV: 1 ownerToken  2 ttlMs. ZADD XX our lease while it has not run out: 1 = extended, 0 = gone. */
export const RW_RENEW = `${PRELUDE}
settle()
for i = 1, 2 do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    redis.call('ZADD', KEYS[i], 'XX', now + tonumber(ARGV[2]), ARGV[1])
    keepHolders()
    return 1
  end
end
return 0
`;

/** { live waiters, { { mode, token, since, owner, expiry }, ... } }: no ownerTokens leave Redis. */
export const RW_INSPECT = `${PRELUDE}
settle()
local holders = {}
for i, mode in ipairs({ 'read', 'write' }) do
  local scored = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES')
  for j = 1, #scored, 2 do
    local spec = redis.call('HGET', KEYS[3], scored[j]) or ''
    local token, since, owner = string.match(spec, '^(%d+) (%d+) (.*)$')
    if token then table.insert(holders, { mode, token, since, owner, scored[j + 1] }) end
  end
end
return { redis.call('ZCARD', KEYS[6]), holders }
`;

/** The keys of a read-write lock name, in the scripts' order, all on the name's hash tag. */
export function readWriteKeys(prefix: string, name: string): string[] {
  // As lockKeys: a name that starts with '}' gets a space before it, so the tag is never empty.
  const tag = `${prefix}{${name.startsWith('}') ? ' ' : ''}${name}}:rw`;
  return ['readers', 'writer', 'grants', 'fence', 'queue', 'waiters', 'pending'].map((k) => `${tag}:${k}`);
}

/** The suffix of the key that exists exactly while a read-write lock name is held (list()). */
export const READ_WRITE_HELD_SUFFIX = '}:rw:grants';

/** The token when granted, else [−(ms until the soonest lease may expire), the fence counter]. */
export type RwAcquireAnswer = string | [number, string];
/** [live waiters, holders as [mode, token, since ms, owner, expiry ms]]. */
export type RwInspectAnswer = [number, Array<['read' | 'write', string, string, string, string]>];

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
}

/** The scripts as commands of one client (EVALSHA, loaded on first use). */
export class ReadWriteScripts {
  readonly #scripts: ScriptCommands;

  constructor(redis: Redis | Cluster) {
    this.#scripts = new ScriptCommands(redis, {
      fencekitRwAcquire: { numberOfKeys: 7, lua: RW_ACQUIRE },
      fencekitRwRelease: { numberOfKeys: 7, lua: RW_RELEASE },
      fencekitRwRenew: { numberOfKeys: 7, lua: RW_RENEW },
      fencekitRwInspect: { numberOfKeys: 7, lua: RW_INSPECT },
    });
  }

  acquire(keys: string[], a: RwAcquireArgs): Promise<RwAcquireAnswer> {
    return this.#scripts.run('fencekitRwAcquire', keys, [
      a.ownerToken,
      a.ttlMs,
      a.owner,
      a.wait ? '1' : '0',
      a.mode,
      a.waiterTtlMs,
      a.channel,
    ]) as Promise<RwAcquireAnswer>;
  }

  /** true = our grant was dropped; false = none was ours (our place, if any, is gone too). */
  async release(keys: string[], ownerToken: string): Promise<boolean> {
    return (await this.#scripts.run('fencekitRwRelease', keys, [ownerToken])) === 1;
  }

  async renew(keys: string[], ownerToken: string, ttlMs: number): Promise<boolean> {
    return (await this.#scripts.run('fencekitRwRenew', keys, [ownerToken, ttlMs])) === 1;
  }

  inspect(keys: string[]): Promise<RwInspectAnswer> {
    return this.#scripts.run('fencekitRwInspect', keys, []) as Promise<RwInspectAnswer>;
  }
}
