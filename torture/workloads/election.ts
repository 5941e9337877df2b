import { connect, createElection, type Election, type Leadership, type LockProvider } from 'fencekit';
import { type CheckOptions, checkHistory, type RuleTally } from '../checker.js';
import { now } from '../history.js';
import { between } from '../random.js';
import { sleep } from '../sleep.js';
import { checkFailovers, checkStaleObserves } from './election-rules.js';
import { unsafeElection } from './election-unsafe.js';
import { codeOf, grantRecorder, recordedWrite } from './grants.js';
import type { LeftoverContext, WorkerContext, Workload } from './workload.js';

const NAME = 'elected';

/** The read behind a report started at most this long before it (callTimeoutMs 1 s + 2 s slack). */
const READ_WINDOW_MS = 3_000;
/** A resign() this quick (and fault-free) was confirmed by the server, not cut short by its wait. */
const RESIGN_CONFIRMED_MS = 500;

/**
 * Elections through the Election API, obtained as users do (createElection: the native one on etcd
 * and ZooKeeper, one over the provider's locks elsewhere). Candidates campaign, write with their
 * term as fencing token while their signal is live, sometimes proclaim, then resign; observers
 * iterate observe() and call leader() now and then, recording every report.
 */
export const electionWorkload: Workload = {
  name: 'election',
  backends: ['memory', 'redis', 'postgres', 'etcd', 'zookeeper', 'redlock'],
  unsafe: ['two-leaders', 'stale-observe', 'no-failover'],
  storageKeys: [NAME],
  // One worker in three observes; the rest campaign.
  mode: (index) => (index % 3 === 2 ? 'observer' : 'candidate'),
  run: runElectionWorker,
  leftovers: async ({ provider }: LeftoverContext) => {
    const found: string[] = [];
    const leader = await createElection(provider, NAME)
      .leader()
      .catch((error: unknown) => ({ error: String(error) }));
    if (leader) found.push(`${NAME}: leader ${JSON.stringify(leader, bigintJson)}`);
    const info = await provider.inspect(NAME).catch((error: unknown) => ({ error: String(error) }));
    if (info && ('error' in info || info.holder || info.waiters > 0))
      found.push(`${NAME}: ${JSON.stringify(info, bigintJson)}`);
    return found;
  },
  check: (events, options: CheckOptions) => {
    const result = checkHistory(events, options);
    const failover: RuleTally = { judged: 0 };
    result.violations.push(
      ...checkStaleObserves(events, { readWindowMs: READ_WINDOW_MS, resignConfirmedMs: RESIGN_CONFIRMED_MS }),
      ...checkFailovers(events, {
        boundMs: options.progressBoundMs,
        recoveryMs: 2 * (options.ttlMs ?? 2_000),
        tally: failover,
      }),
    );
    result.judged = { failover: failover.judged };
    return result;
  },
};

async function runElectionWorker(ctx: WorkerContext): Promise<void> {
  const { config, emit, stop } = ctx;
  const provider = await connect(config.url, { ...config.connectOptions, ...sessionOptions(config) });
  ctx.onProvider?.(provider);
  stop.addEventListener('abort', () => emit({ type: 'stopping', t: now(), worker: config.id }), {
    once: true,
  });
  const real = createElection(provider, NAME);
  const election = config.unsafe ? unsafeElection(real, config.unsafe, ctx.random) : real;
  try {
    if (config.mode === 'observer')
      await Promise.all([observeLoop(ctx, election), leaderLoop(ctx, election)]);
    else await campaignLoop(ctx, election, provider);
  } finally {
    await provider.close().catch(() => undefined);
  }
}

/** campaign → term (fenced writes, a proclaim now and then) → resign, until stopped. */
async function campaignLoop(ctx: WorkerContext, election: Election, provider: LockProvider): Promise<void> {
  const { config, emit, stop, random, storage } = ctx;
  const grants = grantRecorder(config.id, emit);
  const pause = (ms: number) => sleep(ms, stop);
  const noFailover = config.unsafe === 'no-failover';
  // Only the native elections proclaim; the others answer NotImplementedError.
  let proclaims = typeof (provider as { election?: unknown }).election === 'function';
  let campaigns = 0;
  while (!stop.aborted) {
    const value = `${config.id}/c${++campaigns}`;
    emit({ type: 'request', t: now(), worker: config.id, key: NAME });
    let leadership: Leadership;
    try {
      leadership = await election.campaign(value, { waitMs: noFailover ? 0 : 5_000, signal: stop });
    } catch (error) {
      if (stop.aborted) break;
      emit({ type: 'acquire-error', t: now(), worker: config.id, key: NAME, code: codeOf(error) });
      await pause(noFailover ? 30_000 : 100);
      continue;
    }
    const { term, signal } = leadership;
    const grant = grants.granted(NAME, 'term', term, signal);
    const writes = noFailover ? Number.POSITIVE_INFINITY : between(random, 1, 4);
    for (let i = 0, proclaimed = 0; i < writes && !stop.aborted; i++) {
      await pause(between(random, 0, config.criticalMaxMs));
      const live = !signal.aborted;
      if (!live && random() > 0.5) break; // a well-behaved leader stops; half keep going
      if (live && proclaims && random() < 0.3) {
        const next = `${grant}/p${++proclaimed}`;
        const tStart = now();
        try {
          await leadership.proclaim(next);
          emit({ type: 'proclaim', t: now(), tStart, worker: config.id, grant, key: NAME, value: next });
        } catch (error) {
          const code = codeOf(error);
          if (code === 'NOT_IMPLEMENTED') proclaims = false;
          // Not refused (a timeout, a lost connection): the server may have applied it.
          else if (code !== 'NOT_HOLDER') {
            emit({
              type: 'proclaim',
              t: now(),
              tStart,
              worker: config.id,
              grant,
              key: NAME,
              value: next,
              unconfirmed: true,
            });
          }
        }
      }
      const value = `${grant}/${i}`;
      await recordedWrite(storage, emit, { worker: config.id, key: NAME, grant, token: term, value, live });
    }
    const tStart = now();
    try {
      await leadership.resign();
      emit({ type: 'resigned', t: now(), tStart, worker: config.id, grant });
    } catch {
      // not confirmed: the term ends with its lease
    }
    emit({ type: 'release', t: now(), worker: config.id, grant });
    await pause(between(random, 50, 400));
  }
}

/** Every report of observe(), restarted after an error, until stopped. */
async function observeLoop(ctx: WorkerContext, election: Election): Promise<void> {
  const { config, emit, stop } = ctx;
  while (!stop.aborted) {
    let since = now();
    try {
      for await (const info of election.observe({ signal: stop })) {
        const t = now();
        if (stop.aborted) break;
        emit({ type: 'observe', t, since, worker: config.id, key: NAME, via: 'observe', ...report(info) });
        since = now(); // the iterator reads the next report only after this
      }
    } catch (error) {
      if (stop.aborted) break;
      emit({ type: 'acquire-error', t: now(), worker: config.id, key: NAME, code: codeOf(error) });
      await sleep(200, stop);
    }
  }
}

/** leader() now and then, beside observe(). */
async function leaderLoop(ctx: WorkerContext, election: Election): Promise<void> {
  const { config, emit, stop, random } = ctx;
  while (!stop.aborted) {
    await sleep(between(random, 200, 1_000), stop);
    if (stop.aborted) break;
    const since = now();
    try {
      const info = await election.leader();
      emit({
        type: 'observe',
        t: now(),
        since,
        worker: config.id,
        key: NAME,
        via: 'leader',
        ...report(info),
      });
    } catch (error) {
      if (!stop.aborted)
        emit({ type: 'acquire-error', t: now(), worker: config.id, key: NAME, code: codeOf(error) });
    }
  }
}

/**
 * etcd's and ZooKeeper's terms live as long as the candidate's session (10 s by default), not the
 * run's ttlMs: give the session that lease, so that "a new term within TTL + a bound" after a
 * leader's kill means the same on every backend.
 */
function sessionOptions(config: WorkerContext['config']): Record<string, number> {
  const ttlMs = Number(config.connectOptions.ttlMs ?? 2_000);
  if (config.url.startsWith('etcd:')) return { sessionTtlMs: ttlMs };
  if (config.url.startsWith('zk:')) return { sessionTimeoutMs: ttlMs };
  return {};
}

const report = (info: { term: bigint; value: string } | null) => ({
  term: info ? String(info.term) : null,
  value: info ? info.value : null,
});

const bigintJson = (_key: string, value: unknown) => (typeof value === 'bigint' ? String(value) : value);
