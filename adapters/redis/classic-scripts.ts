import { createHash } from 'node:crypto';

/**
 * The original libraries' key layout and protocol (redlock 5: the resource key holding a random
 * value; redis-semaphore 5: `mutex:<key>` holding the identifier, `semaphore:<key>` a sorted set of
 * identifiers scored by the holder's clock), written so that a replica still running the original
 * and one running the facade exclude each other on the same keys. The one addition is a fencing
 * counter per lock key (see fenceKeyOf), incremented by the same script that grants: the original
 * never reads it, so it changes nothing for the original's replicas.
 */

export interface Script {
  readonly lua: string;
  readonly sha: string;
}

function script(lua: string): Script {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

/**
 * next_token(fenceKey): the next fencing token. A counter INCR finds missing (new, or lost with the
 * server's data) starts at the server's TIME in microseconds, as fencekit's own layout does, so
 * tokens do not go backwards after such a loss nor after a switch to that layout.
 */
const NEXT_TOKEN = `
local function next_token(key)
  local token = redis.call('INCR', key)
  if token == 1 then
    local t = redis.call('TIME')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', key, string.format('%.0f', token))
  end
  return string.format('%.0f', token)
end
`;

/**
 * redlock's acquire: KEYS are the n resources then their n fence counters; ARGV value, duration.
 * 0 when any resource exists, else every resource is set (SET PX) and their tokens are returned.
 */
export const REDLOCK_ACQUIRE = script(`${NEXT_TOKEN}
local n = #KEYS / 2
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
local tokens = {}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  tokens[i] = next_token(KEYS[n + i])
end
return tokens
`);

/** redlock's extend: every resource must still hold ARGV[1]; then each is set again for ARGV[2] ms. */
export const REDLOCK_EXTEND = script(`
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) ~= ARGV[1] then return 0 end
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
end
return #KEYS
`);

/** redlock's release: deletes each resource that still holds ARGV[1]; the count deleted. */
export const REDLOCK_RELEASE = script(`
local count = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('DEL', key)
    count = count + 1
  end
end
return count
`);

/**
 * The token a refresh answers. An adoption (fresh '1': acquiredExternally, a holder this object did
 * not grant) gets a new one, never the counter's value, which is the token of whoever was granted
 * last: two holders must not share a token. Else the counter's value; a counter found missing
 * starts again as next_token does, above every token it gave.
 */
const REFRESH_TOKEN = `${NEXT_TOKEN}
local function refresh_token(key, fresh)
  if fresh == '1' then return next_token(key) end
  local current = redis.call('GET', key)
  if current then return current end
  return next_token(key)
end
`;

/** redis-semaphore's mutex: KEYS mutex key, fence; ARGV identifier, lockTimeout. A token, or 0. */
export const MUTEX_ACQUIRE = script(`${NEXT_TOKEN}
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return next_token(KEYS[2]) end
return 0
`);

/** Extends the mutex key while it holds the identifier (ARGV[3]: fresh): a token, or 0. */
export const MUTEX_REFRESH = script(`${REFRESH_TOKEN}
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return refresh_token(KEYS[2], ARGV[3])
end
return 0
`);

export const MUTEX_RELEASE = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

/**
 * The members a holder has in a semaphore's sorted set: the identifier (Semaphore), or
 * `<identifier>_0` … `<identifier>_<permits-1>` (MultiSemaphore), as redis-semaphore writes them.
 */
const MEMBERS = `
local function members(identifier, permits, multi)
  if multi == '0' then return { identifier } end
  local list = {}
  for i = 0, permits - 1 do table.insert(list, identifier .. '_' .. i) end
  return list
end
`;

/**
 * redis-semaphore's semaphore: KEYS set, fence; ARGV limit, permits, identifier, lockTimeout, now,
 * multi ('1' for MultiSemaphore's member names). Members older than lockTimeout (by the scores,
 * the holders' clocks) are dropped first. A token, or 0.
 */
export const SEMAPHORE_ACQUIRE = script(`${NEXT_TOKEN}${MEMBERS}
local limit, permits = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[4]))
if redis.call('ZCARD', KEYS[1]) + permits > limit then return 0 end
for _, member in ipairs(members(ARGV[3], permits, ARGV[6])) do
  redis.call('ZADD', KEYS[1], now, member)
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return next_token(KEYS[2])
`);

/**
 * Moves the holder's members' scores to now while its first member is still there (ARGV as
 * SEMAPHORE_ACQUIRE's, then ARGV[7]: fresh): a token, or 0.
 */
export const SEMAPHORE_REFRESH = script(`${REFRESH_TOKEN}${MEMBERS}
local permits = tonumber(ARGV[2])
local now = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[4]))
local mine = members(ARGV[3], permits, ARGV[6])
if not redis.call('ZSCORE', KEYS[1], mine[1]) then return 0 end
for _, member in ipairs(mine) do redis.call('ZADD', KEYS[1], now, member) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return refresh_token(KEYS[2], ARGV[7])
`);

/**
 * KEYS fence counters; ARGV the token of each. Raises every counter to at least its token: a grant
 * by a majority carries the largest of the majority's tokens, and once each of that majority's
 * counters is at least that, any later majority (which shares a client with it) counts above it.
 * The number of counters, so that a reply says every one was raised.
 */
export const RAISE_FENCES = script(`
for i, key in ipairs(KEYS) do
  local current = tonumber(redis.call('GET', key) or '0')
  if current < tonumber(ARGV[i]) then redis.call('SET', key, ARGV[i]) end
end
return #KEYS
`);

/** KEYS set; ARGV permits, identifier, multi. The count of members removed. */
export const SEMAPHORE_RELEASE = script(`${MEMBERS}
return redis.call('ZREM', KEYS[1], unpack(members(ARGV[2], tonumber(ARGV[1]), ARGV[3])))
`);

/**
 * The fencing counter of a lock key, on the same Redis Cluster slot. A key without a hash tag gets
 * fencekit's own layout's counter (`fencekit:{<key>}:fence`, hashed on the whole key as the key
 * itself is), so tokens keep rising after a switch to that layout. A key with a tag keeps it:
 * `fencekit:fence:<key>` (the prefix has no brace, so the key's tag is the first). Both live under
 * fencekit's own prefix, which neither original writes.
 */
export function fenceKeyOf(key: string): string {
  if (hashTagOf(key) === undefined && !key.includes('}')) return `fencekit:{${key}}:fence`;
  return `fencekit:fence:${key}`;
}

/** What Redis Cluster hashes: the text between the first '{' and the next '}', if not empty. */
function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open === -1) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}
