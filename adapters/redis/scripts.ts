import type { Cluster, Redis } from 'ioredis';
import { InvalidArgumentError } from '../../src/errors.js';
import { validDate } from '../../src/holder-record.js';

/**
 * The Lua scripts: every step that must not interleave with another client's runs as one script.
 * Keys of one name share the hash tag {name}, so they live on one Redis Cluster slot.
 *
 * The keys of a name (see LockKeys) go in this order, each script taking the first ones it uses:
 * KEYS[1] lock  KEYS[2] queue  KEYS[3] waiters  KEYS[4] pending  KEYS[5] fence, and the lock-delay
 * marker and the queue's arrival clock after them (each script names where: `local DELAY = KEYS[n]`,
 * `local CLOCK = KEYS[n]`).
 * Times come from the server's TIME, never the client's clock.
 *
 * Lock-delay: a grant that asked for one writes the marker "ownerToken delayMs" with PX ttl + delay,
 * and every renewal extends both together. A clean release deletes both. When the grant expires, the
 * marker outlives it by the delay; a force-release sets the marker's PX to the delay. While a marker
 * that is not the caller's exists, the name is busy: nobody is granted and nothing is handed over,
 * and waiters poll until it expires (their refusal says how long it has left).
 */

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * ours(value, ownerToken): whether a lock value (or a lock-delay marker) belongs to that grant.
 * delayed(ownerToken): whether another grant's lock-delay keeps the name (needs DELAY).
 * keepDelay(ownerToken, ttl): extends our marker, if any, to ttl + its delay (needs DELAY).
 */
const OURS = `
local function ours(value, id)
  return value and string.sub(value, 1, #id + 1) == id .. ' '
end
local function delayed(id)
  local marker = redis.call('GET', DELAY)
  return marker and not ours(marker, id)
end
local function keepDelay(id, ttl)
  local marker = redis.call('GET', DELAY)
  if ours(marker, id) then
    redis.call('PEXPIRE', DELAY, tonumber(ttl) + tonumber(string.match(marker, ' (%d+)$')))
  end
end
`;

/**
 * grant(ownerToken, ttl, owner, delay): a new token, the lock key that says who holds it, and the
 * grant's lock-delay marker when it asked for one.
 * A counter that INCR finds missing (a new name, or one Redis lost: restart without AOF, eviction)
 * starts at the server's TIME in microseconds, so tokens never go backwards after such a loss as
 * long as the server's clock does not and a name gets fewer than a million grants a second.
 * Numbers stay below 2^53, exact in Lua; '%.0f' prints them without an exponent.
 */
const GRANT = `
local function grant(id, ttl, owner, delay)
  local token = redis.call('INCR', KEYS[5])
  if token == 1 then
    local t = redis.call('TIME')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[5], string.format('%.0f', token))
  end
  token = string.format('%.0f', token)
  redis.call('SET', KEYS[1], id .. ' ' .. token .. ' ' .. now .. ' ' .. owner, 'PX', ttl)
  if tonumber(delay) > 0 then
    redis.call('SET', DELAY, id .. ' ' .. delay, 'PX', tonumber(ttl) + tonumber(delay))
  end
  return token
end
`;

/**
 * Drops ownerToken id from the waiting keys (needs CLOCK). The arrival clock goes with the last
 * place in the queue: it orders waiters only, and a free name keeps no key but its fence counter.
 */
const UNQUEUE = `
local function unqueue(id)
  if redis.call('ZREM', KEYS[2], id) == 1 and redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('DEL', CLOCK)
  end
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
end
`;

/** Waiters that stopped refreshing their place (crashed, cut off) leave the queue. */
const PRUNE = `
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do unqueue(id) end
`;

/**
 * The queue is a sorted set of ownerTokens scored by arrival, in microseconds of the server's
 * clock: when a waiter queues, the server's TIME less how long the request had already waited in
 * its process (ARGV waited ms), so that a process's next request, which queues only once the one
 * before it is done, still takes its place by when it was asked for rather than at the back (the
 * order across processes is the order of asking, not a round of processes). That clock is made
 * monotonic per name (see ARRIVAL_NOW): a server clock stepped back does not put new requests
 * ahead of those already waiting.
 */
const FIRST = `
local function firstQueued()
  while true do
    local id = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    -- A place whose liveness entry is gone (evicted, deleted by hand) would block the queue: drop it.
    if id == nil or redis.call('ZSCORE', KEYS[3], id) then return id end
    unqueue(id)
  end
end
`;

/**
 * arrivalNow(): the server's TIME in microseconds plus the name's offset, never at or below the
 * last arrival this name's queue used. CLOCK ("last offset", a waiting key: it expires with them
 * and goes with the queue's last place) keeps both: when TIME + offset would not pass the last
 * arrival (the server's clock stepped back), the offset grows to make up the step, so arrivals go on
 * moving with real time from there, and a request's wait in its process (subtracted from its
 * arrival) still places it among the others by when it was asked for. Needs t.
 */
const ARRIVAL_NOW = `
local function arrivalNow()
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last, offset = string.match(redis.call('GET', CLOCK) or '', '^(%d+) ?(%d*)$')
  last = last and tonumber(last)
  offset = offset and tonumber(offset) or 0
  local asked = now + offset
  if last and asked <= last then
    offset = last + 1 - now
    asked = last + 1
  end
  redis.call('SET', CLOCK, string.format('%.0f %.0f', asked, offset))
  return asked
end
`;

/**
 * KEYS[6] lock-delay marker  KEYS[7] arrival clock. ARGV: 1 ownerToken  2 ttlMs  3 owner text
 * 4 wait ('1'/'0')  5 fair ('1'/'0')  6 waiter TTL ms  7 the pub/sub channel that reaches this waiter
 * ('' if none)  8 lock-delay ms  9 how long the request waited in its process before this call (ms, ≥ 0).
 * Returns the fencing token (string) when granted, else { −(ms until the current grant, or else the
 * lock-delay, expires), at most −1; the fence counter } (and, when waiting, our place is kept or refreshed). The counter
 * lets a waiter tell a hand-over notice made after this refusal (higher token) from a stale one. A grant that already exists for
 * ownerToken (an earlier reply was lost, or a release handed the key to us) is returned with its
 * expiry pushed to ttlMs from now, so the caller may count its lease from this call. A free key
 * with nobody queued takes the short path.
 */
export const ACQUIRE = `local DELAY = KEYS[6]
local CLOCK = KEYS[7]
${OURS}
local me = ARGV[1]
local held = redis.call('GET', KEYS[1])
if ours(held, me) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  keepDelay(me, ARGV[2])
  return string.match(held, '^%S+ (%d+)')
end
${NOW}
${GRANT}
local busy = held or delayed(me)
if not busy and redis.call('EXISTS', KEYS[2]) == 0 then return grant(me, ARGV[2], ARGV[3], ARGV[8]) end
${UNQUEUE}
${PRUNE}
${FIRST}
${ARRIVAL_NOW}
local first = firstQueued()
if not busy and (ARGV[5] == '0' or first == nil or first == me) then
  unqueue(me)
  return grant(me, ARGV[2], ARGV[3], ARGV[8])
end
if ARGV[4] == '1' then
  local waiterTtl = tonumber(ARGV[6])
  if redis.call('ZADD', KEYS[3], now + waiterTtl, me) == 1 then
    local waited = math.min(math.max(tonumber(ARGV[9]) or 0, 0), 86400000)
    local arrived = arrivalNow() - math.floor(waited * 1000)
    redis.call('ZADD', KEYS[2], string.format('%.0f', arrived), me)
    -- "ttl[:delay] channel-length channel owner": a delay only when asked for, as before it.
    local spec = ARGV[2]
    if tonumber(ARGV[8]) > 0 then spec = spec .. ':' .. ARGV[8] end
    redis.call('HSET', KEYS[4], me, spec .. ' ' .. #ARGV[7] .. ' ' .. ARGV[7] .. ' ' .. ARGV[3])
  end
  -- The waiting keys vanish by themselves once nobody refreshes them.
  for _, key in ipairs({ KEYS[2], KEYS[3], KEYS[4], CLOCK }) do
    redis.call('PEXPIRE', key, waiterTtl * 2)
  end
end
local busyMs = redis.call('PTTL', held and KEYS[1] or DELAY)
return { -math.max(busyMs, 1), redis.call('GET', KEYS[5]) or false }
`;

/**
 * The key is free: in fair mode it is granted to the first live waiter at once (with that
 * waiter's owner text, and its ttl but no longer than its place in the queue would have lived) and the notice "ownerToken token" on that waiter's channel tells it
 * so, which saves the waiter a round trip; otherwise the notice "ownerToken" invites it to try.
 * Nobody queued means nobody listens: every waiter queues before it waits, and one whose place
 * lapsed polls. While a lock-delay runs, nothing is handed over: the first waiter takes the key
 * when its poll finds the marker gone. Needs OURS and UNQUEUE defined before it.
 */
const HAND_OVER = `
${NOW}
${GRANT}
${PRUNE}
${FIRST}
local nextId = redis.call('EXISTS', DELAY) == 0 and firstQueued()
local spec = nextId and redis.call('HGET', KEYS[4], nextId)
if spec then
  local ttl, delay, length, rest = string.match(spec, '^(%d+):?(%d*) (%d+) (.*)$')
  if delay == '' then delay = '0' end
  local channel = string.sub(rest, 1, tonumber(length))
  local owner = string.sub(rest, tonumber(length) + 2)
  local notice = nextId
  if ARGV[2] == '1' then
    -- Provisional: the grant lasts only as long as the waiter's place would (it may have died
    -- since its last refresh); the waiter extends it to its ttl once it takes it.
    local alive = tonumber(redis.call('ZSCORE', KEYS[3], nextId) or 0) - now
    if alive > 0 and alive < tonumber(ttl) then ttl = tostring(math.floor(alive)) end
    unqueue(nextId)
    notice = nextId .. ' ' .. grant(nextId, ttl, owner, delay)
  end
  if channel ~= '' then redis.call('PUBLISH', channel, notice) end
end
`;

/**
 * KEYS[6] lock-delay marker  KEYS[7] arrival clock. ARGV: 1 ownerToken  2 fair ('1'/'0').
 * Compare-and-delete of the grant and its lock-delay marker (a clean release starts no delay), then
 * hand over to the next waiter. 1 = deleted, 0 = not ours.
 */
export const RELEASE = `local DELAY = KEYS[6]
local CLOCK = KEYS[7]
${OURS}
${UNQUEUE}
if not ours(redis.call('GET', KEYS[1]), ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
if ours(redis.call('GET', DELAY), ARGV[1]) then redis.call('DEL', DELAY) end
if redis.call('EXISTS', KEYS[2]) == 1 then
${HAND_OVER}
end
return 1
`;

/**
 * KEYS[1] lock  KEYS[2] revoked  KEYS[3] lock-delay marker. ARGV: 1 ownerToken  2 ttlMs.
 * Compare-and-PEXPIRE of the grant and its lock-delay marker (ttl + delay): 1 = extended, 0 = not
 * ours, -1 = not ours because an operator removed this grant (force-release's marker).
 */
export const RENEW = `local DELAY = KEYS[3]
${OURS}
if not ours(redis.call('GET', KEYS[1]), ARGV[1]) then
  if redis.call('GET', KEYS[2]) == ARGV[1] then return -1 end
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
keepDelay(ARGV[1], ARGV[2])
return 1
`;

/**
 * KEYS: lock queue waiters pending fence revoked lock-delay arrival-clock. ARGV: 1 the holder's
 * ownerToken ('' = whoever holds it)  2 fair  3 its fencing token ('' = any)  4 how long the marker
 * outlives the lease (ms).
 * An operator's compare-and-delete: removes the grant only if it is that one, leaves the holder's
 * ownerToken in the revoked marker for as long as the holder may still renew (so its next renewal
 * learns why), starts the grant's lock-delay (its marker now expires after the delay), and hands the
 * key over as a release does (not during the delay). Returns { ownerToken, token, since, owner }
 * of the removed grant, or nil.
 */
export const FORCE_RELEASE = `local DELAY = KEYS[7]
local CLOCK = KEYS[8]
${OURS}
${UNQUEUE}
local held = redis.call('GET', KEYS[1])
if not held then return false end
local id, token, since, owner = string.match(held, '^(%S+) (%d+) (%d+) (.*)$')
if not id or (ARGV[1] ~= '' and id ~= ARGV[1]) or (ARGV[3] ~= '' and token ~= ARGV[3]) then
  return false
end
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[6], id, 'PX', math.max(pttl, 1) + tonumber(ARGV[4]))
local marker = redis.call('GET', DELAY)
if ours(marker, id) then redis.call('PEXPIRE', DELAY, string.match(marker, ' (%d+)$')) end
if redis.call('EXISTS', KEYS[2]) == 1 then
${HAND_OVER}
end
return { id, token, since, owner }
`;

/**
 * KEYS[6] lock-delay marker  KEYS[7] arrival clock. ARGV: 1 ownerToken  2 fair. Leaves the queue, and
 * gives back a grant a release handed us in the meantime (with its marker: never used, so nothing to
 * drain); if the key is free then, hands it over to whoever is first now.
 */
export const LEAVE = `local DELAY = KEYS[6]
local CLOCK = KEYS[7]
${OURS}
${UNQUEUE}
unqueue(ARGV[1])
local held = redis.call('GET', KEYS[1])
if ours(held, ARGV[1]) then
  redis.call('DEL', KEYS[1])
  if ours(redis.call('GET', DELAY), ARGV[1]) then redis.call('DEL', DELAY) end
end
if (not held or ours(held, ARGV[1])) and redis.call('EXISTS', KEYS[2]) == 1 then
${HAND_OVER}
end
return 1
`;

/**
 * KEYS[5] lock-delay marker  KEYS[6] arrival clock. Returns { pttl, token, owner, since, live waiters,
 * holder's ownerToken, ms left of a lost grant's lock-delay (-1: none) } (nil fields when nobody holds
 * the key).
 */
export const INSPECT = `local DELAY = KEYS[5]
local CLOCK = KEYS[6]
${NOW}
${OURS}
${UNQUEUE}
${PRUNE}
local held = redis.call('GET', KEYS[1])
local id, token, since, owner
if held then id, token, since, owner = string.match(held, '^(%S+) (%d+) (%d+) (.*)$') end
local delayMs = -1
if delayed(id or '') then delayMs = redis.call('PTTL', DELAY) end
return { redis.call('PTTL', KEYS[1]), token or false, owner or false, since or false,
  redis.call('ZCOUNT', KEYS[3], now, '+inf'), id or false, delayMs }
`;

/**
 * KEYS[1] lock  KEYS[2] queue  KEYS[3] waiters  KEYS[4] pending  KEYS[5] arrival clock. ARGV: 1 limit.
 * Returns the first `limit` live waiters in queue order as { ownerToken, pending spec (false if
 * missing), arrival score, … }, after dropping those that stopped refreshing their place, as inspect
 * does.
 */
export const QUEUE = `local CLOCK = KEYS[5]
${NOW}
${UNQUEUE}
${PRUNE}
local found = {}
local queued = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #queued, 2 do
  if #found >= tonumber(ARGV[1]) * 3 then break end
  local id = queued[i]
  if redis.call('ZSCORE', KEYS[3], id) then
    table.insert(found, id)
    table.insert(found, redis.call('HGET', KEYS[4], id) or false)
    table.insert(found, string.format('%.0f', tonumber(queued[i + 1])))
  end
end
return found
`;

/**
 * KEYS[1] fence  KEYS[2] lock. ARGV: 1 token  2 ownerToken. Raises the fence counter to at least
 * token, and writes token into our lock key (same expiry), so that inspect() on any majority sees
 * the grant's token, not this instance's own count (Redlock: see redlock.ts).
 */
export const RAISE_FENCE = `${OURS}
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
local held = redis.call('GET', KEYS[2])
if ours(held, ARGV[2]) then
  local pttl = redis.call('PTTL', KEYS[2])
  local rest = string.match(held, '^%S+ %d+ (.*)$')
  if pttl > 0 and rest then redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. ARGV[1] .. ' ' .. rest, 'PX', pttl) end
end
return 1
`;

/** The keys of one name, all on the hash tag {name}. */
export interface LockKeys {
  /** "ownerToken token since owner-text", PX ttl: one key says who holds it, so a grant is one SET. */
  lock: string;
  /** The fencing counter (INCR). */
  fence: string;
  /** The ownerToken of the last force-released grant, kept while its holder may still renew. */
  revoked: string;
  /** "ownerToken delayMs" of a grant that asked for lock-delay: PX ttl + delay, see above. */
  delay: string;
  /** The waiting ownerTokens, a sorted set scored by arrival (see FIRST). */
  queue: string;
  /** The last arrival the queue used and the offset added to TIME (µs): its clock never goes back (see ARRIVAL_NOW). */
  arrivalClock: string;
  /** ownerToken → expiry by the server's clock: waiters that stop refreshing drop out. */
  waiters: string;
  /**
   * ownerToken → "ttlMs channel-length channel owner-text": what a release needs to hand the key to
   * that waiter and to tell it ("ownerToken token", or "ownerToken": your turn to try).
   */
  pending: string;
}

/** A key prefix must not hold braces: the name's hash tag must be the first '{…}' of every key. */
export function validatePrefix(prefix: string): string {
  if (/[{}]/.test(prefix))
    throw new InvalidArgumentError('prefix', `must not contain '{' or '}', got "${prefix}"`);
  return prefix;
}

export function lockKeys(prefix: string, name: string): LockKeys {
  // Redis Cluster hashes what lies between the first '{' and the next '}'. A name that starts with
  // '}' would leave that empty (the whole key is hashed then, a slot per key): such names get a
  // space before them, which no valid name starts with, so no two names' keys meet.
  const tag = `${prefix}{${name.startsWith('}') ? ' ' : ''}${name}}`;
  return {
    lock: `${tag}:lock`,
    fence: `${tag}:fence`,
    revoked: `${tag}:revoked`,
    delay: `${tag}:delay`,
    queue: `${tag}:arrivals`,
    arrivalClock: `${tag}:arrival-clock`,
    waiters: `${tag}:waiters`,
    pending: `${tag}:pending`,
  };
}

export interface AcquireArgs {
  ownerToken: string;
  ttlMs: number;
  owner: string;
  wait: boolean;
  fair: boolean;
  waiterTtlMs: number;
  /** Where a release tells this waiter that the key is its own ('' for none). */
  channel: string;
  /** Lock-delay of the grant (ms); default 0, none. */
  lockDelayMs?: number;
  /** How long the request had waited in its process before this call (ms): its place by arrival. */
  waitedMs?: number;
}

/** "Not yours": [−(ms until the current grant expires), the fence counter's value]. */
export type Refusal = [number, string | null];
/** The token of our grant (string), or a refusal. */
export type AcquireAnswer = string | Refusal;

/** inspect's answer: [pttl, token, owner, since, live waiters, holder's ownerToken, delay left ms]. */
export type InspectAnswer = [
  number,
  string | null,
  string | null,
  string | null,
  number,
  string | null,
  number,
];

/** A grant an operator removed, as the lock key said. */
export interface ForceReleased {
  ownerToken: string;
  token: bigint;
  since: Date;
  owner: string | undefined;
}

/** A waiter as queue() reads it: its ownerToken, the owner text its pending spec carries, its arrival. */
export interface QueuedSpec {
  ownerToken: string;
  /** undefined when none was given or the spec cannot be read. */
  owner: string | undefined;
  /** When it was asked for, by the server's clock (its arrival score); undefined if unreadable. */
  since: Date | undefined;
}

/** An arrival score (microseconds of the server's clock, see FIRST) as a Date; undefined if it is none. */
export function arrivalOf(score: unknown): Date | undefined {
  if (typeof score !== 'string' || !/^\d{1,19}$/.test(score)) return undefined;
  return validDate(new Date(Math.floor(Number(score) / 1000)));
}

/**
 * The owner text of a pending spec, "ttl[:delay] channel-length channel owner" (see ACQUIRE);
 * undefined when it has none, or is not in that form (never a throw: a server's data is not trusted).
 */
export function ownerOfSpec(spec: unknown): string | undefined {
  if (typeof spec !== 'string') return undefined;
  const head = /^\S+ (\d{1,6}) /.exec(spec);
  if (!head) return undefined;
  // The channel's length is in bytes, as Lua counts them.
  const bytes = Buffer.from(spec, 'utf8');
  const channelEnd = Buffer.byteLength(head[0], 'utf8') + Number(head[1]);
  if (bytes.length < channelEnd + 1 || bytes[channelEnd] !== 0x20) return undefined;
  const owner = bytes.subarray(channelEnd + 1).toString('utf8');
  return owner === '' ? undefined : owner;
}

/** How long the revoked marker outlives the removed lease: time for a late renewal to learn why. */
const REVOKED_MARKER_SLACK_MS = 5_000;

type Call = (...args: Array<string | number>) => Promise<unknown>;

/** The scripts as commands of one client (EVALSHA, loaded on first use); each sends only its keys. */
export class LockScripts {
  readonly redis: Redis | Cluster;
  readonly #commands: Record<string, Call>;

  constructor(redis: Redis | Cluster) {
    this.redis = redis;
    const define = (name: string, numberOfKeys: number, lua: string): void => {
      redis.defineCommand(name, { numberOfKeys, lua });
    };
    define('fencekitAcquire', 7, ACQUIRE);
    define('fencekitRelease', 7, RELEASE);
    define('fencekitRenew', 3, RENEW);
    define('fencekitForceRelease', 8, FORCE_RELEASE);
    define('fencekitLeave', 7, LEAVE);
    define('fencekitInspect', 6, INSPECT);
    define('fencekitQueue', 5, QUEUE);
    define('fencekitRaiseFence', 2, RAISE_FENCE);
    this.#commands = redis as unknown as Record<string, Call>;
  }

  /** The fencing token (string) when granted, else a refusal. */
  acquire(k: LockKeys, a: AcquireArgs): Promise<AcquireAnswer> {
    return this.#run(
      'fencekitAcquire',
      k.lock,
      k.queue,
      k.waiters,
      k.pending,
      k.fence,
      k.delay,
      k.arrivalClock,
      a.ownerToken,
      a.ttlMs,
      a.owner,
      a.wait ? '1' : '0',
      a.fair ? '1' : '0',
      a.waiterTtlMs,
      a.channel,
      a.lockDelayMs ?? 0,
      Math.max(0, Math.round(a.waitedMs ?? 0)),
    ) as Promise<AcquireAnswer>;
  }

  /** true = deleted, false = not ours (any more). fair: hand the key to the first waiter. */
  async release(k: LockKeys, ownerToken: string, fair: boolean): Promise<boolean> {
    return (
      (await this.#run(
        'fencekitRelease',
        ...this.#all(k),
        k.delay,
        k.arrivalClock,
        ownerToken,
        fair ? '1' : '0',
      )) === 1
    );
  }

  /** true = extended, false = not ours, 'revoked' = an operator removed this grant. */
  async renew(k: LockKeys, ownerToken: string, ttlMs: number): Promise<boolean | 'revoked'> {
    const answer = await this.#run('fencekitRenew', k.lock, k.revoked, k.delay, ownerToken, ttlMs);
    return answer === -1 ? 'revoked' : answer === 1;
  }

  /** Removes the grant of `holder` (ownerToken, '' = whoever) if its token is `token` ('' = any). */
  async forceRelease(
    k: LockKeys,
    guard: { holder: string; token: string },
    fair: boolean,
  ): Promise<ForceReleased | null> {
    const answer = (await this.#run(
      'fencekitForceRelease',
      ...this.#all(k),
      k.revoked,
      k.delay,
      k.arrivalClock,
      guard.holder,
      fair ? '1' : '0',
      guard.token,
      REVOKED_MARKER_SLACK_MS,
    )) as [string, string, string, string] | null;
    if (!answer) return null;
    const [ownerToken, token, since, owner] = answer;
    return { ownerToken, token: BigInt(token), since: new Date(Number(since)), owner: owner || undefined };
  }

  async leave(k: LockKeys, ownerToken: string, fair: boolean): Promise<void> {
    await this.#run('fencekitLeave', ...this.#all(k), k.delay, k.arrivalClock, ownerToken, fair ? '1' : '0');
  }

  inspect(k: LockKeys): Promise<InspectAnswer> {
    return this.#run(
      'fencekitInspect',
      k.lock,
      k.queue,
      k.waiters,
      k.pending,
      k.delay,
      k.arrivalClock,
    ) as Promise<InspectAnswer>;
  }

  /** The first `limit` live waiters, in queue order: each one's ownerToken and pending spec. */
  async queue(k: LockKeys, limit: number): Promise<QueuedSpec[]> {
    const answer = await this.#run(
      'fencekitQueue',
      k.lock,
      k.queue,
      k.waiters,
      k.pending,
      k.arrivalClock,
      limit,
    );
    const flat = Array.isArray(answer) ? answer : [];
    const queued: QueuedSpec[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const since = arrivalOf(flat[i + 2]);
      queued.push({ ownerToken: String(flat[i]), owner: ownerOfSpec(flat[i + 1]), since });
    }
    return queued;
  }

  async raiseFence(k: LockKeys, token: bigint, ownerToken: string): Promise<void> {
    await this.#run('fencekitRaiseFence', k.fence, k.lock, token.toString(), ownerToken);
  }

  #all(k: LockKeys): string[] {
    return [k.lock, k.queue, k.waiters, k.pending, k.fence];
  }

  #run(name: string, ...args: Array<string | number>): Promise<unknown> {
    return (this.#commands[name] as Call).apply(this.redis, args);
  }
}
