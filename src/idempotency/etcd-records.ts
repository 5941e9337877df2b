import {
  CompareResult,
  CompareTarget,
  type Etcd3,
  type ICompare,
  type IKeyValue,
  type IRequestOp,
  type ITxnResponse,
} from 'etcd3';
import { EtcdLeases } from './etcd-leases.js';
import type { StoredOutcome } from './outcome.js';
import type { BeginRequest, BeginResult, CompleteRequest, CompleteResult, RecordBackend } from './records.js';

export interface EtcdRecordsOptions {
  /** Before every key: the URL's namespace, then the store's prefix (default `fencekit/idem/`). */
  prefix: string;
  /** The gRPC deadline of every call. */
  callTimeoutMs: number;
  /** An AuthenticationError for a refusal of who we are, else the error as it is. */
  refused(error: unknown): unknown;
}

/** The record of a key: its payload hash, and once done, the token that stored it and the outcome. */
interface RecordValue {
  h: string;
  s: 'r' | 'd';
  t?: string;
  o?: 'v' | 'e';
  b?: string;
}

/** The claim of a run in flight: which start made it (to adopt a replay) and the payload hash. */
interface ClaimValue {
  a: string;
  h: string;
}

interface Seen {
  record: IKeyValue | undefined;
  claim: IKeyValue | undefined;
}

/**
 * Records on etcd. A key k has up to two etcd keys:
 * - `<prefix>record/k`, the record (hash, state, outcome), on a shared retention lease
 *   (see EtcdLeases): etcd deletes it once its retention has passed;
 * - `<prefix>claim/k`, the claim of the run in flight, on a lease of its own that the run renews:
 *   a crashed run's claim goes with its lease, and a repeat may then take the record over.
 * Both are written by the one Txn that starts a run, so the token is that Txn's revision (the
 * claim's create revision): etcd's revision is one counter for the whole store that never goes
 * back, also across a restart or a key deleted and made again. Renewal, completion and abandon
 * compare the claim's create revision with the token, so a run taken over can change nothing.
 */
export class EtcdRecords implements RecordBackend {
  readonly name = 'etcd';
  readonly #client: Etcd3;
  readonly #prefix: string;
  readonly #timeoutMs: number;
  readonly #refused: (error: unknown) => unknown;
  readonly #leases: EtcdLeases;
  /** The payload hash of each run this store started, by key and token: completion needs it. */
  readonly #hashes = new Map<string, string>();

  constructor(client: Etcd3, options: EtcdRecordsOptions) {
    this.#client = client;
    this.#prefix = options.prefix;
    this.#timeoutMs = options.callTimeoutMs;
    this.#refused = options.refused;
    this.#leases = new EtcdLeases(client, () => this.#deadline());
  }

  async begin({ key, hash, leaseMs, retentionMs, attempt }: BeginRequest): Promise<BeginResult> {
    return this.#call(async () => {
      let seen = await this.#read(key);
      for (let i = 0; i < 10; i++) {
        if (seen.record) {
          const record = decode<RecordValue>(seen.record);
          if (record.h !== hash) return { state: 'mismatch' };
          if (record.s === 'd') return { state: 'completed', outcome: outcomeOf(record) };
        }
        if (seen.claim) {
          // Our own start, whose reply was lost: adopt it, restarting its lease from now.
          const lease = seen.claim.lease;
          if (decode<ClaimValue>(seen.claim).a === attempt && (await this.#leases.keepalive(lease)) > 0)
            return this.#started(key, seen.claim, hash);
          return { state: 'in-flight', retryAfterMs: await this.#leases.leftMs(lease) };
        }
        // A new key, or a run whose claim ended with its lease: start (take over) with a new claim.
        const [lease, retention] = await Promise.all([
          this.#leases.grant(leaseMs),
          this.#leases.retention(retentionMs),
        ]);
        const record: RecordValue = { h: hash, s: 'r' };
        const claim: ClaimValue = { a: attempt, h: hash };
        const started = await this.#txn(
          [
            seen.record ? sameMod(this.#record(key), seen.record.mod_revision) : absent(this.#record(key)),
            absent(this.#claim(key)),
          ],
          [put(this.#record(key), record, retention), put(this.#claim(key), claim, lease)],
          this.#readOps(key),
        );
        if (started.succeeded) {
          const token = BigInt(started.header.revision);
          this.#hashes.set(runOf(key, token), hash);
          return { state: 'started', token };
        }
        seen = seenIn(started);
        // The etcd3 client replayed our Txn after a lost answer: the claim is this start's own.
        if (seen.claim && decode<ClaimValue>(seen.claim).a === attempt && seen.claim.lease === lease)
          return this.#started(key, seen.claim, hash);
      }
      throw new Error('the record kept changing under ten attempts to begin');
    });
  }

  async renew(key: string, token: bigint, _leaseMs: number): Promise<boolean> {
    return this.#call(async () => {
      // The claim's lease was granted for leaseMs: a keepalive restarts that TTL.
      const owned = await this.#txn([sameCreate(this.#claim(key), token)], [read(this.#claim(key))], []);
      const claim = owned.succeeded ? owned.responses[0]?.response_range.kvs[0] : undefined;
      return claim !== undefined && (await this.#leases.keepalive(claim.lease)) > 0;
    });
  }

  async complete({ key, token, outcome, retentionMs }: CompleteRequest): Promise<CompleteResult> {
    return this.#call(async () => {
      const run = runOf(key, token);
      let hash = this.#hashes.get(run);
      if (hash === undefined) {
        // Not started by this store: the claim says the hash, if the run still holds it.
        const seen = await this.#read(key);
        if (seen.claim?.create_revision !== String(token)) return completion(seen, token);
        hash = decode<ClaimValue>(seen.claim).h;
      }
      const done: RecordValue = {
        h: hash,
        s: 'd',
        t: String(token),
        o: outcome.kind === 'final-error' ? 'e' : 'v',
        b: outcome.body,
      };
      const retention = await this.#leases.retention(retentionMs);
      // The fenced completion: only while the claim is the one this run's start made.
      const stored = await this.#txn(
        [sameCreate(this.#claim(key), token)],
        [put(this.#record(key), done, retention), { request_delete_range: { key: this.#claim(key) } }],
        this.#readOps(key),
      );
      this.#hashes.delete(run); // answered either way: the run is over for this store
      if (stored.succeeded) return { stored: true };
      const seen = seenIn(stored);
      // The claim's lease ran out and nobody took the run over: the record is still the one this
      // run's start wrote (its mod revision is the token) and no claim is there. The run may still
      // complete, as on the other stores; only a takeover (a newer start) fences it out.
      if (
        !seen.claim &&
        seen.record?.mod_revision === String(token) &&
        decode<RecordValue>(seen.record).s === 'r'
      ) {
        const late = await this.#txn(
          [sameMod(this.#record(key), String(token)), absent(this.#claim(key))],
          [put(this.#record(key), done, retention)],
          this.#readOps(key),
        );
        if (late.succeeded) return { stored: true };
        return completion(seenIn(late), token);
      }
      return completion(seen, token);
    });
  }

  async abandon(key: string, token: bigint): Promise<void> {
    await this.#call(async () => {
      this.#hashes.delete(runOf(key, token));
      // The claim's lease, now holding no key, ends by itself.
      await this.#txn(
        [sameCreate(this.#claim(key), token)],
        [{ request_delete_range: { key: this.#claim(key) } }],
        [],
      );
    });
  }

  async close(): Promise<void> {
    this.#client.close(); // ends every call still out
    this.#hashes.clear(); // runs cut short by the close complete nowhere now
  }

  #started(key: string, claim: IKeyValue, hash: string): BeginResult {
    const token = BigInt(claim.create_revision);
    this.#hashes.set(runOf(key, token), hash);
    return { state: 'started', token };
  }

  /** Runs one step; a refusal of who we are becomes AUTH_FAILED, anything else is the store's outage. */
  async #call<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      // A shared retention lease etcd no longer has (revoked by hand): the next call grants another.
      if (/requested lease not found/i.test(String((error as Error)?.message)))
        this.#leases.forgetRetention();
      throw this.#refused(error);
    }
  }

  #deadline(): { deadline: Date } {
    return { deadline: new Date(Date.now() + this.#timeoutMs) };
  }

  #record(key: string): Buffer {
    return Buffer.from(`${this.#prefix}record/${key}`);
  }

  #claim(key: string): Buffer {
    return Buffer.from(`${this.#prefix}claim/${key}`);
  }

  #readOps(key: string): IRequestOp[] {
    return [read(this.#record(key)), read(this.#claim(key))];
  }

  /** The record and the claim, in one revision. */
  async #read(key: string): Promise<Seen> {
    return seenIn(await this.#txn([], this.#readOps(key), []));
  }

  #txn(compare: ICompare[], success: IRequestOp[], failure: IRequestOp[]): Promise<ITxnResponse> {
    return this.#client.kv.txn({ compare, success, failure }, this.#deadline());
  }
}

/** A completion that was not stored: our own earlier one (its reply lost), or the token there now. */
function completion(seen: Seen, token: bigint): CompleteResult {
  const record = seen.record ? decode<RecordValue>(seen.record) : undefined;
  if (record?.s === 'd' && record.t === String(token)) return { stored: true };
  if (seen.claim) return { stored: false, current: BigInt(seen.claim.create_revision) };
  if (!record || !seen.record) return { stored: false, current: null };
  // A running record is written only by the Txn that started its run: its mod revision is the token.
  return { stored: false, current: BigInt(record.t ?? seen.record.mod_revision) };
}

function outcomeOf(record: RecordValue): StoredOutcome {
  return { kind: record.o === 'e' ? 'final-error' : 'value', body: record.b ?? '' };
}

const runOf = (key: string, token: bigint) => `${token} ${key}`;

function decode<T>(kv: IKeyValue): T {
  return JSON.parse(kv.value.toString()) as T;
}

function seenIn(response: ITxnResponse): Seen {
  const [record, claim] = response.responses.map((r) => r.response_range?.kvs[0]);
  return { record, claim };
}

const read = (key: Buffer): IRequestOp => ({ request_range: { key } });

const put = (key: Buffer, value: unknown, lease: string): IRequestOp => ({
  request_put: { key, value: Buffer.from(JSON.stringify(value)), lease },
});

const absent = (key: Buffer): ICompare => ({
  key,
  target: CompareTarget.Create,
  result: CompareResult.Equal,
  create_revision: 0,
});

const sameCreate = (key: Buffer, revision: bigint): ICompare => ({
  key,
  target: CompareTarget.Create,
  result: CompareResult.Equal,
  create_revision: revision.toString(),
});

const sameMod = (key: Buffer, revision: string): ICompare => ({
  key,
  target: CompareTarget.Mod,
  result: CompareResult.Equal,
  mod_revision: revision,
});
