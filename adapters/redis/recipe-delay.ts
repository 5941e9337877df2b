/**
 * Lock-delay as the semaphore's and the read-write lock's scripts keep it (Lua, needs `now`).
 *
 * A grant that asked for a delay carries it in its record and in its waiter's spec, after the first
 * number of that field: "n:delayMs" (no ":delayMs" when it asked for none, so records without a
 * delay read as before). A delay that runs is a ZSET member scored by when it ends (server ms, the
 * lost lease's expiry + the delay, never earlier), counted as held until then and dropped by the
 * first script after that; the key lives no longer than its last member's end needs. The semaphore
 * keeps its delays in its holders ZSET (semaphore-scripts.ts), the read-write lock in a ZSET per
 * mode (read-write-scripts.ts).
 *
 * delayOf(field): the delay ("n:delay" → delay, "n" → 0).
 * withDelay(n, delay): the field for n with a delay ("n" when the delay is 0).
 * addDelay(key, member, until): the member counts until `until`; the key lives at least that long.
 * endDelays(key): drops the members whose delay has ended.
 */
export const DELAY_LUA = `
local function delayOf(field)
  return tonumber(string.match(field or '', '^%d+:(%d+)') or '0')
end

local function withDelay(n, delay)
  if tonumber(delay) > 0 then return n .. ':' .. delay end
  return tostring(n)
end

local function addDelay(key, member, until_)
  redis.call('ZADD', key, until_, member)
  if redis.call('PTTL', key) < until_ - now then redis.call('PEXPIRE', key, until_ - now) end
end

local function endDelays(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
end
`;

/**
 * When a delay the server listed ends: a Date, or undefined for an answer that is no time (nothing
 * a server sends may crash the caller).
 */
export function delayEnd(ms: unknown): Date | undefined {
  const n = typeof ms === 'string' || typeof ms === 'number' ? Number(ms) : Number.NaN;
  return Number.isFinite(n) && n > 0 ? new Date(n) : undefined;
}
