import { readdir, readFile } from 'node:fs/promises';

/**
 * The command's session, named by its leader's pid: the CLI starts the command detached, so it
 * leads a session (and a process group) of its own, and every process it forks stays in that
 * session unless it calls setsid() itself. A member that moves to another process group
 * (setpgid: a shell with job control, a process manager) stays in the session, which is why the
 * CLI follows the session and not the group.
 *
 * On Linux the session's processes are read from /proc (field 6 of /proc/<pid>/stat) and each
 * process group found there is signalled. A process counts as gone when it is reaped or a zombie
 * all of whose threads are zombies too (it runs no code and holds no file; its parent, or an init
 * that may be slow or absent in a container, reaps it later). What cannot be observed is not
 * gone: the leader's group, or a group seen in the session before, that kill(-pgid, 0) still finds
 * while /proc does not list it keeps the session alive (hidepid, another user's process) — the
 * latter only when the look could not read every entry /proc listed. A group id is free again
 * once its group is empty and may then name an unrelated group, so a group is signalled only while
 * the look finds a process of the session in it, and a group seen before is forgotten once a look
 * that read every entry finds no process of the session in it. Without a /proc of this pid namespace only the
 * leader's group is seen, through kill(-pgid, 0). A process that calls setsid() leaves the
 * session and is beyond reach.
 */

/** The fields of /proc/<pid>/stat the CLI reads. */
export interface ProcStat {
  state: string;
  pgrp: number;
  session: number;
}

/** What one look at the session found. */
export interface SessionScan {
  /** Whether some process of the session may still run. */
  live: boolean;
  /** The process groups this look found a process of the session in (to signal). */
  groups: Set<number>;
  /** The groups to remember for the next look: these, and those a hidden process may still hold. */
  known: Set<number>;
}

/** Sends signal to every process of the group; nothing when the group is gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is empty. EPERM: what is left runs as another user; the scans tell.
  }
}

/**
 * "pid (comm) state ppid pgrp session …": comm may hold spaces and parentheses, so the fields
 * are read after the last ')'. Undefined for a text that does not have that shape.
 */
export function parseStat(text: string): ProcStat | undefined {
  const end = text.lastIndexOf(')');
  if (end < 0) return undefined;
  const [state = '', , pgrp = '', session = ''] = text.slice(end + 2).split(' ');
  if (state === '' || !/^\d+$/.test(pgrp) || !/^\d+$/.test(session)) return undefined;
  return { state, pgrp: Number(pgrp), session: Number(session) };
}

/**
 * Looks at the session led by sid. `knownGroups` are groups seen in it before: one that kill()
 * still finds while /proc lists none of its processes may be hidden from this process (live),
 * unless this look read every entry /proc listed (then nothing of the session is hidden in it).
 */
export async function scanSession(
  sid: number,
  knownGroups: ReadonlySet<number>,
  listPids: PidLister = procPids,
): Promise<SessionScan> {
  const pids = await listPids();
  if (pids === undefined) {
    const live = groupExists(sid);
    return { live, groups: new Set([sid]), known: new Set([sid]) };
  }
  const groups = new Set<number>();
  const listedGroups = new Set<number>();
  let unreadable = false;
  let live = false;
  // In batches: one open file per process at once would run out of descriptors on a busy host.
  for (let i = 0; i < pids.length; i += SCAN_BATCH)
    await Promise.all(
      pids.slice(i, i + SCAN_BATCH).map(async (pid) => {
        const stat = await readStat(`/proc/${pid}/stat`);
        if (stat === 'gone') return; // exited since the listing
        if (stat === 'hidden') {
          unreadable = true; // may be a process of the session (the kill() check below)
          return;
        }
        listedGroups.add(stat.pgrp);
        if (stat.session !== sid) return;
        // A zombie keeps its group id taken, so its group may be signalled; it does not run.
        groups.add(stat.pgrp);
        if (await running(pid, stat.state)) live = true;
      }),
    );
  const known = new Set([sid, ...groups]);
  if (!listedGroups.has(sid) && groupExists(sid)) {
    live = true; // hidden from /proc, or started after the listing: not gone
    groups.add(sid);
  }
  // A group seen before and listed now without a process of the session has a new owner. One not
  // listed may hold a hidden process of the session only when some entry could not be read.
  if (unreadable)
    for (const pgid of knownGroups)
      if (!listedGroups.has(pgid) && groupExists(pgid)) {
        live = true; // not known empty; not signalled: the group id may name another group now
        known.add(pgid);
      }
  return { live, groups, known };
}

/**
 * Whether no process of the session can run any more. An empty look is taken twice, with a
 * SIGKILL to the groups it found (zombies of the session hold them) in between: a process that
 * forked and exited between the listing and the reading of its entry may have left a child the
 * first look missed; the second one finds it (a child in a killed group cannot fork again: fork
 * fails with a fatal signal pending).
 */
export async function sessionIsEmpty(
  sid: number,
  knownGroups: ReadonlySet<number>,
  listPids: PidLister = procPids,
): Promise<boolean> {
  const first = await scanSession(sid, knownGroups, listPids);
  if (first.live) return false;
  for (const pgid of new Set([sid, ...first.groups])) signalGroup(pgid, 'SIGKILL');
  return !(await scanSession(sid, first.known, listPids)).live;
}

/** Lists the pids /proc shows; undefined when there is no /proc of this pid namespace. */
export type PidLister = () => Promise<string[] | undefined>;

/** The pids /proc lists, or undefined when there is no /proc of this pid namespace. */
async function procPids(): Promise<string[] | undefined> {
  try {
    const self = await readFile('/proc/self/stat', 'utf8');
    if (Number(self.slice(0, self.indexOf(' '))) !== process.pid) return undefined; // another namespace's /proc
    return (await readdir('/proc')).filter((entry) => /^\d+$/.test(entry));
  } catch {
    return undefined; // no /proc (not Linux)
  }
}

/** A process runs unless it is a zombie (or dead) and so is every one of its threads. */
async function running(pid: string, state: string): Promise<boolean> {
  if (!gone(state)) return true;
  let tids: string[];
  try {
    tids = await readdir(`/proc/${pid}/task`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false; // reaped since
    return true; // its threads cannot be seen: not gone
  }
  const states = await Promise.all(tids.map((tid) => readStat(`/proc/${pid}/task/${tid}/stat`)));
  return states.some((stat) => typeof stat !== 'string' && !gone(stat.state));
}

function gone(state: string): boolean {
  return state === 'Z' || state === 'X' || state === 'x';
}

/**
 * The entry's fields; 'gone' when it is gone (ENOENT, ESRCH), 'hidden' when it may not be read
 * (EACCES, EPERM: hidepid) or does not parse. Any other failure (EMFILE) throws: a scan that could
 * not read an entry has no verdict.
 */
async function readStat(path: string): Promise<ProcStat | 'gone' | 'hidden'> {
  try {
    return parseStat(await readFile(path, 'utf8')) ?? 'hidden';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (GONE.has(code)) return 'gone';
    if (HIDDEN.has(code)) return 'hidden';
    throw error;
  }
}

const GONE = new Set(['ENOENT', 'ESRCH']);
const HIDDEN = new Set(['EACCES', 'EPERM']);
const SCAN_BATCH = 64;

/** kill(-pgid, 0): ESRCH says the group is empty; anything else (EPERM too) that it is not. */
function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
