/**
 * Lock-delay as the semaphore's and the read-write lock's scripts keep it (Lua, needs `now`).
 *
 * A grant that asked for a delay carries it in its record and in its waiter's spec, after the first
 * number of that field: "n:delayMs" (no ":delayMs" when it asked for none, so records without a
 * delay read as before). A delay that runs is a member of a ZSET scored by when it ends (server
 * ms, never earlier than the lost lease's expiry + the delay): such a member counts as held until
 * then. Every script first drops the members whose delay ended (endDelays), and the ZSET key itself
 * lives no longer than its last member's end (addDelay), so nothing is left behind once the delays
 * are over.
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
