import { DELAY_LUA } from './recipe-delay.js';

/**
 * What the semaphore's and the read-write lock's scripts begin with (Lua). Both lay out their keys
 * 4 to 7 alike: KEYS[4] the fencing counter, KEYS[5] the queue LIST, KEYS[6] the waiters ZSET,
 * KEYS[7] the pending HASH.
 *
 * now: the server's TIME in ms; `t` the TIME itself.
 * The lock-delay functions (recipe-delay.ts).
 * unqueue(id): the waiter leaves the queue, from all three keys every time: if one was lost
 *   (evicted, deleted), a waiter left in the queue list would be granted again and again and block
 *   everyone behind it.
 * handTo(id, spec, grantAs): grants the queue's head `id` (the hand-over of both recipes) and tells
 *   it "ownerToken token" on its channel, so a hand-over costs the waiter no round trip. `spec` is
 *   the parsed rest of its pending entry: { ttl, delay, channel length, "channel owner-text" }.
 *   Provisional: the lease lasts no longer than the waiter's place would have (it may have died
 *   since its last refresh); the waiter extends it to its ttl once it takes it. A lost notice costs
 *   the waiter a poll, whose attempt finds the grant. grantAs(ttl, owner, delay) makes the grant.
 * nextToken(): a new fencing token. A counter Redis lost (restart without AOF, eviction) restarts
 *   past every token it gave: at the server's TIME in microseconds.
 */
export const RECIPE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
${DELAY_LUA}

local function unqueue(id)
  redis.call('LREM', KEYS[5], 0, id)
  redis.call('ZREM', KEYS[6], id)
  redis.call('HDEL', KEYS[7], id)
end

local function handTo(id, spec, grantAs)
  local ttl, delay, length, rest = tonumber(spec[1]), tonumber(spec[2]) or 0, tonumber(spec[3]), spec[4]
  local channel = string.sub(rest, 1, length)
  local owner = string.sub(rest, length + 2)
  local alive = tonumber(redis.call('ZSCORE', KEYS[6], id) or 0) - now
  if alive > 0 and alive < ttl then ttl = math.floor(alive) end
  unqueue(id)
  local token = grantAs(ttl, owner, delay)
  if channel ~= '' then redis.call('PUBLISH', channel, id .. ' ' .. token) end
end

local function nextToken()
  local token = redis.call('INCR', KEYS[4])
  if token == 1 then
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[4], string.format('%.0f', token))
  end
  return string.format('%.0f', token)
end
`;
