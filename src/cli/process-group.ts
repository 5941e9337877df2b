import { readdirSync, readFileSync } from 'node:fs';

/**
 * The command's process group, named by its leader's pid (the CLI starts the command detached: a
 * session and a group of its own). The group is empty when no process of it can run any more:
 * kill(-pgid, 0) fails with ESRCH, or, on Linux, every process /proc lists in it is a zombie (it
 * runs no code and holds no file; its parent, or an init that may be slow or absent in a
 * container, reaps it later). A process that left the group (setsid, setpgid: what a daemon does)
 * is beyond its reach.
 */

/** Sends signal to every process of the group; nothing when the group is gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is empty. EPERM: what is left runs as another user; groupIsEmpty tells.
  }
}

/** Whether no process of the group can run any more (see above). */
export function groupIsEmpty(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
  if (!onlyZombies(pgid)) return false;
  // Zombies only, as far as the scan saw; but a member may have forked between the listing and the
  // reading of its own entry. A SIGKILL to the group kills such a child (fork fails for a process
  // with a fatal signal pending), so a second scan that finds zombies only is the truth.
  signalGroup(pgid, 'SIGKILL');
  return onlyZombies(pgid);
}

/**
 * Whether /proc lists processes of the group and all of them are zombies. Listing none while
 * kill() found some means /proc hides them (hidepid, another user's process): not empty.
 */
function onlyZombies(pgid: number): boolean {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry));
  } catch {
    return false; // no /proc (not Linux): only ESRCH says the group is empty
  }
  let zombies = 0;
  for (const pid of pids) {
    const stat = readStat(pid);
    if (stat?.pgrp !== pgid) continue;
    if (stat.state !== 'Z' && stat.state !== 'X') return false;
    zombies++;
  }
  return zombies > 0;
}

/** State and process group from /proc/<pid>/stat; undefined when the process is gone. */
function readStat(pid: string): { state: string; pgrp: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // it exited since the listing
  }
  // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses, so split after the last ')'.
  const [state = '', , pgrp = ''] = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state, pgrp: Number(pgrp) };
}
