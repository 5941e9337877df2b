import { spawn } from 'node:child_process';
import { readFileSync, writeSync } from 'node:fs';
import { now, type TortureEvent } from '../history.js';
import { seeded } from '../random.js';
import { FencedStorage } from '../storage.js';

/**
 * The command the cli workload runs under `fencekit lock`: a leader, started by the CLI with the
 * grant's token in its environment, and a member it forks into the same session. Both write to the
 * protected storage with that token and say every HEARTBEAT_MS that they still run. The leader
 * records the grant, writes a few times and exits; the member ignores or handles SIGTERM and writes
 * on until SIGKILL reaches it, so every run ends with the CLI's SIGTERM, grace and SIGKILL.
 *
 * Events go to stdout as JSON lines (the CLI's stdout, a pipe the worker reads): a line is below
 * PIPE_BUF, so lines of several processes never interleave. A `{"ctl":"pid"}` line tells the
 * worker a process to clean up after (an orphan whose CLI was killed, an escaped member).
 *
 * argv: <role leader|member> <worker> <grant> <storage url> <fencing 1|0> <escapes 1|0>
 *   <sigterm ignore|handle|obey> <seed> (from the worker's seeded source: a replay writes alike)
 */
const [
  role = '',
  worker = '',
  grant = '',
  storageUrl = '',
  fencing = '1',
  escapes = '0',
  onTerm = 'ignore',
  seed = '0',
] = process.argv.slice(2);
const random = seeded(Number(seed));
const HEARTBEAT_MS = 50;
const MEMBER_WRITE_MS = 100;
/** A member the worker lost track of ends by itself (the worker kills it long before). */
const LIFETIME_CAP_MS = 60_000;

const token = BigInt(process.env.FENCEKIT_FENCING_TOKEN ?? '0');
const key = process.env.FENCEKIT_LOCK_KEY ?? '';

function line(value: object): void {
  try {
    writeSync(1, `${JSON.stringify(value)}\n`);
  } catch {
    process.exit(0); // EPIPE: the worker is gone, nobody records us any more
  }
}

const emit = (event: TortureEvent) => line(event);

/** Field 22 of /proc/<pid>/stat: with the pid, names the process and no later one that reuses the pid. */
function startTime(pid: number | 'self' = 'self'): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  if (role === 'leader')
    emit({
      type: 'grant',
      t: now(),
      worker,
      key,
      grant,
      kind: 'lock',
      token: String(token),
      abortedAtGrant: false,
    });
  line({ ctl: 'pid', grant, pid: process.pid, start: startTime() });
  let terminated = false;
  if (role === 'member') {
    process.on('SIGTERM', () => {
      if (onTerm === 'obey') process.exit(143);
      if (onTerm === 'handle') terminated = true; // says so in its writes, and writes on
    });
  }
  const beat = () => emit({ type: 'alive', t: now(), worker, grant, member: role });
  beat();
  setInterval(beat, HEARTBEAT_MS);
  setTimeout(() => process.exit(0), LIFETIME_CAP_MS).unref();
  const storage = new FencedStorage(storageUrl, fencing === '1');
  const write = async (i: number) => {
    const t = now();
    const result = await storage.write(key, token, `${grant}/${role}/${i}`);
    emit({
      type: 'write',
      t,
      tEnd: now(),
      worker,
      key,
      grant,
      token: String(token),
      live: !terminated,
      result,
    });
  };
  if (role === 'leader') {
    const member = spawn(
      process.execPath,
      [process.argv[1] ?? '', 'member', worker, grant, storageUrl, fencing, escapes, onTerm, seed],
      // escapes (the control run): the member leaves the session, out of the CLI's sight.
      { stdio: 'inherit', detached: escapes === '1' },
    );
    member.unref();
    // Reported here too: an escaped member is out of the CLI's reach, the worker must find it.
    if (member.pid !== undefined) line({ ctl: 'pid', grant, pid: member.pid, start: startTime(member.pid) });
    // Up to about 4 s: long enough that a partition or pause of its CLI can cost the lease.
    const writes = 1 + Math.floor(random() * 10);
    for (let i = 0; i < writes; i++) {
      await sleep(Math.floor(random() * 400));
      await write(i);
    }
    process.exit(0);
  }
  for (let i = 0; ; i++) {
    await write(i);
    await sleep(MEMBER_WRITE_MS);
  }
}

void main();
