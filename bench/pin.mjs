// CPU placement for loopback benchmarks. Left to itself, the scheduler runs a client and its server
// on one CPU while their ping-pong is short (no idle CPU to wake) and spreads them once the client
// does a little more per call; on a VM that halts an idle CPU (no guest halt-polling here) each
// wake-up then costs tens of µs. So a case that costs 30% more CPU can show 3–10× the latency of
// its floor, and per-round ratios of one pair can range from 0.4 to over 10. A benchmark pins
// both to fixed CPUs and reports each layout: 'separate CPUs' (like client and server on two
// hosts: every reply wakes the other side) and 'one CPU' (only CPU work counts: the strictest).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

// The CPUs this process may use (a container's cpuset may not start at 0), read once, before
// anything is pinned.
const allowed = allowedCpus();

/**
 * The layouts to measure, or one unpinned layout where taskset or a second CPU is missing, or the
 * server is not the benchmark's own (`serverPinnable` false).
 */
export function cpuLayouts(serverPinnable) {
  // Without taskset `allowed` is empty: the layouts collapse to the scheduler's own choice.
  if (!serverPinnable || allowed.length < 2) return [{ name: 'unpinned', client: null, server: null }];
  const [first, second] = allowed;
  return [
    { name: 'separate CPUs', client: first, server: second },
    { name: 'one CPU', client: first, server: first },
  ];
}

/**
 * Pins this process (every thread) and each server process with all its children. Pass only servers
 * the benchmark started itself: a server given by URL may be shared, or its PID may name another
 * process here (a container's PID 1).
 */
export function applyLayout(layout, serverPids) {
  if (layout.client === null) return;
  pinTree(process.pid, layout.client);
  for (const pid of serverPids) pinTree(pid, layout.server);
}

/**
 * Back to every allowed CPU, for whatever runs after the benchmark. Called from `finally`: it
 * warns instead of throwing, so that it never hides the error that ended the benchmark.
 */
export function resetLayout(serverPids) {
  if (allowed.length < 2) return;
  const all = allowed.join(',');
  for (const pid of [process.pid, ...serverPids]) {
    try {
      pinTree(pid, all);
    } catch (error) {
      console.warn(`bench/pin: could not unpin process ${pid}: ${error.message}`);
    }
  }
}

function allowedCpus() {
  try {
    const list = execFileSync('taskset', ['-cp', String(process.pid)], { encoding: 'utf8' })
      .split(':')
      .pop();
    return list
      .trim()
      .split(',')
      .flatMap((part) => {
        const [from, to = from] = part.split('-').map(Number);
        return Array.from({ length: to - from + 1 }, (_, i) => String(from + i));
      });
  } catch {
    return [];
  }
}

// A PostgreSQL server forks a process per connection: its children are pinned too, and new ones
// inherit the postmaster's CPUs.
function pinTree(pid, cpus) {
  execFileSync('taskset', ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
  let children = '';
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' });
  } catch {
    return; // pgrep exits 1 when there are none
  }
  for (const child of children.split('\n').filter(Boolean)) {
    try {
      pinTree(Number(child), cpus);
    } catch (error) {
      if (existsSync(`/proc/${child}`)) throw error; // a child that exited meanwhile needs no pinning
    }
  }
}
