/**
 * The events a torture run records. Times are milliseconds of CLOCK_MONOTONIC (process.hrtime),
 * which on Linux is one clock for every process of the machine, so worker processes and the runner
 * stamp events on a common time line without any hand-shake.
 */

/**
 * lock: a lock; term: a leader's term; permit: semaphore permits; run: an idempotent run's fn;
 * read, write: the grants of a read-write lock.
 */
export type GrantKind = 'lock' | 'term' | 'permit' | 'run' | 'read' | 'write';

/** A grant's call to the fenced storage: a write, or a read-write lock reader's plain read. */
interface StorageCall {
  /** When the signal was checked, just before the call was sent. */
  t: number;
  /** When the storage answered. */
  tEnd: number;
  worker: string;
  key: string;
  grant: string;
  token: string;
  /** !signal.aborted at t. */
  live: boolean;
}

export type TortureEvent =
  | {
      type: 'request';
      t: number;
      worker: string;
      key: string;
      // semaphore workload: the permits asked for (the checker judges how fast a full-size request
      // is granted) and whether the request could wait (acquire, withPermit) or not (tryAcquire).
      permits?: number;
      wait?: boolean;
    }
  | {
      type: 'grant';
      t: number;
      worker: string;
      key: string;
      /** Unique per grant in the run: `<worker>#<n>`. */
      grant: string;
      kind: GrantKind;
      token: string;
      /** signal.aborted when the grant (or term) reached the user's code. */
      abortedAtGrant: boolean;
      /** Why, when abortedAtGrant (no abort event follows then). */
      abortReason?: string;
      /**
       * Terms only, where the election acquires through the provider the worker gave it: whether
       * the term's own lock had already lost its signal then (the term's signal must derive from it).
       */
      lockAborted?: boolean;
      /** Permits only: how many of the limit this grant takes. */
      permits?: number;
      /** Reads only: the write grant this read continues (a downgrade), which it shares a token with. */
      downgradeOf?: string;
    }
  | { type: 'abort'; t: number; worker: string; grant: string; reason: string }
  | (StorageCall & { type: 'write'; result: 'accepted' | 'rejected' | 'error' })
  | { type: 'release'; t: number; worker: string; grant: string }
  /**
   * read-write workload: a reader read the name's storage row (plain, no fencing). `t` is when it
   * checked its signal, just before; `seen` the token the row carried (null: never written).
   */
  | (StorageCall & {
      type: 'read';
      /** Absent when the storage failed to answer. */
      seen?: string | null;
    })
  | { type: 'acquire-error'; t: number; worker: string; key: string; code: string }
  /** The worker process ended without being asked (or was SIGKILLed by the nemesis). */
  | { type: 'crash'; t: number; worker: string; detail: string }
  /** A nemesis fault, from start to heal. `workers` are the workers it froze (SIGSTOP), if any. */
  | {
      type: 'fault';
      t: number;
      tEnd: number;
      kind: string;
      target: string;
      pausedWorkers: string[];
      /**
       * The workers the fault was aimed at (frozen, cut off, slowed, killed); absent when it hit the
       * servers, and so every worker. A workload's checker sees only the faults that could touch it.
       */
      workers?: string[];
      /**
       * Replies to this worker were held back lateMs while the fault lasted. Set only where the
       * lease starts at the server with the grant and is not renewed before the reply (Redis,
       * Redlock): a grant whose reply was that late had already run out when it arrived.
       */
      late?: { worker: string; ms: number };
    }
  /** Something of the run's still held in the backend after every worker closed. */
  | { type: 'leftover'; t: number; workload: string; detail: string }
  // The election workload's events (workloads/election.ts).
  /**
   * A leader report reached the observer: from observe() (`since`: the previous report or the
   * observe() call, before which the read behind this report cannot have started) or from a
   * leader() call (`since`: when the call was made).
   */
  | {
      type: 'observe';
      t: number;
      since: number;
      worker: string;
      key: string;
      via: 'observe' | 'leader';
      term: string | null;
      value: string | null;
    }
  /**
   * A term's proclaim(value) resolved: from t on the term advertises value. `unconfirmed`: the call
   * failed without a refusal (a timeout, a lost connection), so the value may have been applied.
   */
  | {
      type: 'proclaim';
      t: number;
      tStart: number;
      worker: string;
      grant: string;
      key: string;
      value: string;
      unconfirmed?: boolean;
    }
  /** A term's resign() resolved (called at tStart): the term's key is gone on the server. */
  | { type: 'resigned'; t: number; tStart: number; worker: string; grant: string }
  /** The worker was asked to stop (the run's end, as far as its workers go). */
  | { type: 'stopping'; t: number; worker: string }
  // The idempotency workload's events (see workloads/idempotency.ts).
  | {
      /** What one execute() call gave its caller. */
      type: 'outcome';
      t: number;
      worker: string;
      key: string;
      /** The grant of the run this call's fn ran as, if it ran. */
      run?: string;
      /** The result the caller got: the name of the run that produced it (a value or a FinalError's). */
      result?: string;
      /** The result was a FinalError. */
      final?: boolean;
      replayed?: boolean;
      /** The code of the error the caller got instead. */
      error?: string;
      /** The error was neither a FencekitError nor one of the workload's own fn errors. */
      untyped?: boolean;
    }
  | {
      /** Runner side, after every worker stopped: a key's effect row and the result its record replays. */
      type: 'final';
      t: number;
      workload: string;
      key: string;
      /** The effect row: the run that wrote it last and the token it wrote with (null: never written). */
      effect: { value: string | null; token: string | null };
      /** The result a repeat gets now (null: no stored result). */
      stored: { result: string; final: boolean } | null;
    }
  // cli workload: a process of a command run by `fencekit lock` says it still runs (the grant id
  // names the command's group); the CLI process ends (code, or the signal that killed it).
  | { type: 'alive'; t: number; worker: string; grant: string; member: string }
  | {
      type: 'cli-exit';
      t: number;
      worker: string;
      grant: string;
      code: number | null;
      signal: string | null;
    };

export const now = (): number => Number(process.hrtime.bigint()) / 1e6;
