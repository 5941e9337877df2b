import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from '../connect.js';
import { LockTimeoutError, StaleFencingTokenError } from '../errors.js';
import { FencedStore } from '../fencing/fenced-store.js';
import type { LockProvider } from '../types.js';
import type { DemoResult } from './demo.js';

/**
 * The payment story on a network backend, with a real pause: worker A is a child process that
 * takes the lock and is then stopped with SIGSTOP for 2.5 leases (no renewals, no heartbeats),
 * while B in this process waits for the lock and charges the card. A is continued, and sends its
 * charge with its old token. The payment store (here) decides.
 */
export async function runProcessStory(
  url: string,
  cliPath: string,
  fencing: boolean,
  ttlMs: number,
  print: (line: string) => void,
): Promise<DemoResult> {
  const key = 'orders/42';
  const started = performance.now();
  const say = (who: string, text: string) =>
    print(`  t=${String(Math.round(performance.now() - started)).padStart(5)} ms  ${who}  ${text}`);
  const store = new FencedStore<string>();
  let charges = 0;
  let rejected = 0;
  const charge = (who: string, token: bigint) => {
    try {
      if (fencing) store.write('order 42', who, token);
      charges += 1;
      say(
        who,
        `charged the card for order 42 (charges so far: ${charges})${who === 'A' && charges > 1 ? '  <-- DOUBLE CHARGE' : ''}`,
      );
    } catch (error) {
      if (!(error instanceof StaleFencingTokenError)) throw error;
      rejected += 1;
      say(who, `charge REJECTED by the payment store: ${error.message}`);
    }
  };

  const child = spawn(
    process.execPath,
    [cliPath, 'demo-worker', '--url', url, '--key', key, '--ttl', String(ttlMs)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const next = lineReader(child.stdout as NodeJS.ReadableStream);
  let b: LockProvider | undefined;
  try {
    const held = await next();
    const tokenA = BigInt(held.token as string);
    const leaseMs = Number(held.leaseMs);
    say('A', `(pid ${child.pid}) acquired "${key}" with fencing token ${tokenA} (lease ${leaseMs} ms)`);
    b = await connect(url, { sessionTtlMs: ttlMs, sessionTimeoutMs: ttlMs });
    const pauseMs = Math.round(leaseMs * 2.5);
    say('A', `checks its lock, is about to charge, and is stopped (SIGSTOP) for ${pauseMs} ms`);
    child.kill('SIGSTOP');
    const bDone = (async () => {
      say('B', `waits for "${key}" (up to ${pauseMs} ms)`);
      try {
        const lock = await (b as LockProvider).acquire(key, { ttlMs, waitMs: pauseMs, owner: 'worker-B' });
        say('B', `acquired "${key}" with fencing token ${lock.fencingToken}`);
        charge('B', lock.fencingToken);
        await lock.release();
        return lock.fencingToken;
      } catch (error) {
        if (!(error instanceof LockTimeoutError)) throw error;
        say('B', 'gave up: the lock stayed with the stopped worker (its connection is still open)');
        return undefined;
      }
    })();
    await sleep(pauseMs);
    child.kill('SIGCONT');
    const tokenB = await bDone;
    say('A', 'is continued and charges the card, still believing it holds the lock');
    (child.stdin as NodeJS.WritableStream).write('charge\n');
    const sent = await next();
    charge('A', BigInt(sent.token as string));
    return { charges, rejected, tokens: { a: tokenA, b: tokenB ?? 0n } };
  } finally {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    if (child.exitCode === null) await once(child, 'exit');
    await b?.close();
  }
}

/** Reads JSON lines one at a time (breaking out of a readline for-await would close it). */
function lineReader(input: NodeJS.ReadableStream): () => Promise<Record<string, string>> {
  const lines: string[] = [];
  const waiting: Array<{ ok: (line: string) => void; fail: (error: Error) => void }> = [];
  let ended = false;
  const reader = createInterface({ input });
  reader.on('line', (line) => {
    const waiter = waiting.shift();
    if (waiter) waiter.ok(line);
    else lines.push(line);
  });
  reader.on('close', () => {
    ended = true;
    for (const waiter of waiting.splice(0)) waiter.fail(new Error('worker A exited'));
  });
  return async () => {
    const line =
      lines.shift() ??
      (ended
        ? Promise.reject(new Error('worker A exited'))
        : new Promise<string>((ok, fail) => waiting.push({ ok, fail })));
    return JSON.parse(await line) as Record<string, string>;
  };
}

/** The child side: acquire, report, then on "charge" report the token it would charge with. */
export async function demoWorker(url: string, key: string, ttlMs: number): Promise<void> {
  const provider = await connect(url, { sessionTtlMs: ttlMs, sessionTimeoutMs: ttlMs });
  const lock = await provider.acquire(key, { ttlMs, owner: 'worker-A' });
  const leaseMs = await effectiveLease(provider, ttlMs);
  console.log(JSON.stringify({ event: 'held', token: lock.fencingToken.toString(), leaseMs }));
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() !== 'charge') continue;
    // The code between the check and the write does not look at lock.signal again: the pause hit here.
    console.log(JSON.stringify({ event: 'charge', token: lock.fencingToken.toString() }));
  }
}

/** How long the backend keeps a silent holder's lock: the session TTL where there is a session. */
async function effectiveLease(provider: LockProvider, ttlMs: number): Promise<number> {
  const withSession = provider as unknown as {
    sessionTtlMs?: number;
    sessionTimeoutMs?: () => Promise<number>;
  };
  if (typeof withSession.sessionTtlMs === 'number') return withSession.sessionTtlMs;
  if (typeof withSession.sessionTimeoutMs === 'function') return withSession.sessionTimeoutMs();
  return ttlMs;
}
