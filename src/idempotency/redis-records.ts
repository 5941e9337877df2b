import type { Redis, RedisOptions } from 'ioredis';
import { AuthenticationError } from '../errors.js';
import { redisRefusal } from '../redis-refusal.js';
import type { BeginRequest, BeginResult, CompleteRequest, CompleteResult, RecordBackend } from './records.js';

// One hash per key, expiring by the server's clock (PEXPIRE); the lease end is the server's TIME in
// ms. Fields: h payload hash, s state (r running / d done), t token, l lease end, o outcome kind,
// b body, a the attempt that started the run. Nothing else is kept: a field nothing reads (records
// of older versions also hold c, created, and d, completed) costs every run a write, and the
// completion a read of the clock.
const NOW = `local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)`;

// The next token, as the lock and semaphore counters draw theirs: a counter that INCR finds missing
// (the first run, or one Redis lost: a restart without AOF, an eviction, a flush) starts at the
// server's TIME in microseconds, above every token it gave as long as the server's clock does not
// go back and fewer than a million runs a second start. Below 2^53, so exact in Lua; '%.0f' prints
// it without an exponent. Needs NOW's `tm`.
const NEXT_TOKEN = `local token = redis.call('INCR', KEYS[2])
if token == 1 then
  token = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  redis.call('SET', KEYS[2], string.format('%.0f', token))
end
token = string.format('%.0f', token)`;

// A replay or a mismatch is answered before reading the clock: it needs no time.
const BEGIN = `local r = redis.call('HMGET', KEYS[1], 'h', 's', 't', 'l', 'o', 'b', 'a')
if r[1] and r[1] ~= ARGV[1] then return {'mismatch'} end
if r[2] == 'd' then return {'completed', r[5], r[6]} end
${NOW}
if r[1] then
  if r[7] == ARGV[4] then
    redis.call('HSET', KEYS[1], 'l', now + tonumber(ARGV[2]))
    return {'started', r[3]}
  end
  local left = tonumber(r[4]) - now
  if left > 0 then return {'in-flight', tostring(left)} end
end
${NEXT_TOKEN}
redis.call('HSET', KEYS[1], 'h', ARGV[1], 's', 'r', 't', token, 'l', now + tonumber(ARGV[2]), 'a', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'started', token}`;

const RENEW = `${NOW}
local r = redis.call('HMGET', KEYS[1], 't', 's')
if r[1] ~= ARGV[1] or r[2] ~= 'r' then return 0 end
redis.call('HSET', KEYS[1], 'l', now + tonumber(ARGV[2]))
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1`;

const COMPLETE = `local r = redis.call('HMGET', KEYS[1], 't', 's')
if r[1] ~= ARGV[1] then return {0, r[1]} end
if r[2] == 'd' then return {1} end -- our own earlier attempt landed (its reply was lost)
redis.call('HSET', KEYS[1], 's', 'd', 'o', ARGV[2], 'b', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1}`;

const ABANDON = `local r = redis.call('HMGET', KEYS[1], 't', 's')
if r[1] == ARGV[1] and r[2] == 'r' then redis.call('HSET', KEYS[1], 'l', 0) end
return 1`;

type Script = (...args: (string | number)[]) => Promise<unknown>;

export interface RedisRecordsOptions {
  /** Key prefix; the record of key k is `<prefix>{k}`, the token counter `<prefix>tokens`. */
  prefix?: string;
  redis?: RedisOptions;
}

export class RedisRecords implements RecordBackend {
  readonly name = 'redis';
  readonly #prefix: string;
  #connecting: Promise<void> | undefined;
  #reconnected: Promise<void> | undefined;
  /** The server's last refusal of who we are, until a connection is ready again. */
  #refusal: unknown;
  readonly #client: Redis;

  constructor(client: Redis, options: RedisRecordsOptions = {}) {
    this.#client = client;
    this.#prefix = options.prefix ?? 'fencekit:idem:';
    for (const [name, lua, keys] of [
      ['idemBegin', BEGIN, 2],
      ['idemRenew', RENEW, 1],
      ['idemComplete', COMPLETE, 1],
      ['idemAbandon', ABANDON, 1],
    ] as const)
      client.defineCommand(name, { lua, numberOfKeys: keys });
    // Errors reach the caller through each command; an 'error' event without a listener would crash.
    // A refusal arrives only as such an event (the command then sees "Connection is closed"): kept.
    client.on('error', (error) => {
      if (redisRefusal(error) !== undefined) this.#refusal = error;
    });
    client.on('ready', () => {
      this.#refusal = undefined;
    });
  }

  /** Runs a script; once connected, the command's own promise, with no async frame around it. */
  #script(name: string, ...args: (string | number)[]): Promise<unknown> {
    const sent =
      this.#client.status === 'ready'
        ? this.#send(name, args)
        : this.#ready().then(() => this.#send(name, args));
    return sent.catch(this.#asRefusal);
  }

  #send(name: string, args: (string | number)[]): Promise<unknown> {
    return ((this.#client as unknown as Record<string, Script>)[name] as Script).apply(this.#client, args);
  }

  /** A refusal of who we are is no outage to retry: the store gives it up at once. */
  readonly #asRefusal = (error: unknown): never => {
    const refusal = redisRefusal(error) === undefined ? this.#refusal : error;
    const why = refusal === undefined ? undefined : redisRefusal(refusal);
    if (why === undefined) throw error;
    const { host = '127.0.0.1', port = 6379 } = this.#client.options;
    throw new AuthenticationError('redis', `${host}:${port}`, why, { cause: refusal });
  };

  /**
   * lazyConnect: the first call connects (and fails fast if refused). After a drop, calls wait for
   * the reconnection instead of failing at once; the store's call deadline bounds the wait.
   */
  async #ready(): Promise<void> {
    const status = this.#client.status;
    if (status === 'ready') return;
    if (status === 'wait') {
      this.#connecting ??= this.#client.connect().finally(() => {
        this.#connecting = undefined;
      });
    }
    if (this.#connecting) return this.#connecting;
    if (status === 'end' || status === 'close') throw new Error('the Redis connection is closed');
    this.#reconnected ??= new Promise<void>((resolve) => {
      this.#client.once('ready', () => {
        this.#reconnected = undefined;
        resolve();
      });
    });
    return this.#reconnected;
  }

  #record(key: string): string {
    return `${this.#prefix}{${key}}`;
  }

  async begin({ key, hash, leaseMs, retentionMs, attempt }: BeginRequest): Promise<BeginResult> {
    const keys = [this.#record(key), `${this.#prefix}tokens`];
    const reply = (await this.#script('idemBegin', ...keys, hash, leaseMs, retentionMs, attempt)) as (
      | string
      | null
    )[];
    switch (reply[0]) {
      case 'started':
        return { state: 'started', token: BigInt(reply[1] as string) };
      case 'completed':
        return {
          state: 'completed',
          outcome: { kind: reply[1] === 'e' ? 'final-error' : 'value', body: reply[2] ?? '' },
        };
      case 'mismatch':
        return { state: 'mismatch' };
      default:
        return { state: 'in-flight', retryAfterMs: Number(reply[1]) };
    }
  }

  async renew(key: string, token: bigint, leaseMs: number): Promise<boolean> {
    return (await this.#script('idemRenew', this.#record(key), String(token), leaseMs)) === 1;
  }

  async complete({ key, token, outcome, retentionMs }: CompleteRequest): Promise<CompleteResult> {
    const kind = outcome.kind === 'final-error' ? 'e' : 'v';
    const reply = (await this.#script(
      'idemComplete',
      this.#record(key),
      String(token),
      kind,
      outcome.body,
      retentionMs,
    )) as (number | string | null)[];
    if (reply[0] === 1) return { stored: true };
    return { stored: false, current: typeof reply[1] === 'string' ? BigInt(reply[1]) : null };
  }

  async abandon(key: string, token: bigint): Promise<void> {
    await this.#script('idemAbandon', this.#record(key), String(token));
  }

  async close(): Promise<void> {
    this.#client.disconnect();
  }
}
