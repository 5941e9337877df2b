import { byKey, type Fault, frozenBetween, type Grant, type Violation, type Write } from '../checker.js';
import type { TortureEvent } from '../history.js';

type Alive = Extract<TortureEvent, { type: 'alive' }>;
type CliExit = Extract<TortureEvent, { type: 'cli-exit' }>;

/**
 * The cli workload's rules, per group (the processes of one command run under one grant):
 *
 * - group-write-after-grant: no write of a group that started after the key's next grant reached
 *   its command is accepted by the storage (rejected is fine: fencing did its part);
 * - released-while-alive: no process of a group runs (a heartbeat or a write) after the key's next
 *   grant, nor after its CLI exited having released.
 *
 * Both hold only while the CLI can stop its group: not for a group whose CLI the nemesis froze at
 * some time since the grant (the group ran on unattended) or killed (an orphan nobody stops). No
 * CLI can keep those promises; the storage's fencing (checkHistory's stale-write) covers them.
 *
 * Against the next grant, a group's last steps within KILL_SLACK_MS of it are not judged: the CLI
 * learns of a loss only a drift margin (tens of ms) before the lease can pass on, and on a busy
 * machine the SIGKILL lands later than that. The next grant is stamped by its group's leader once
 * its Node process has started (100 ms or more after the server granted), which adds to the slack.
 * What these rules are for, a group left running (it writes every 100 ms until killed), shows for
 * far longer; a late step's writes meet fencing.
 */
const KILL_SLACK_MS = 200;

export function checkCliGroups(events: readonly TortureEvent[]): Violation[] {
  const sorted = [...events].sort((a, b) => a.t - b.t);
  const grants = sorted.filter((e): e is Grant => e.type === 'grant');
  const faults = sorted.filter((e): e is Fault => e.type === 'fault');
  const exits = new Map<string, CliExit>();
  for (const e of sorted) if (e.type === 'cli-exit') exits.set(e.grant, e);
  const byId = new Map(grants.map((g) => [g.grant, g]));
  const next = new Map<string, Grant>();
  for (const list of byKey(grants).values())
    for (let i = 0; i + 1 < list.length; i++) next.set(list[i]?.grant ?? '', list[i + 1] as Grant);

  const attended = (g: Grant, t: number) => {
    if (frozenBetween(faults, g.worker, g.t, t)) return false;
    const exit = exits.get(g.grant);
    return !(exit?.signal === 'SIGKILL' && exit.t <= t);
  };
  const out: Violation[] = [];
  const reported = new Set<string>();
  const report = (rule: string, g: Grant, message: string, events: TortureEvent[]) => {
    if (reported.has(`${rule} ${g.grant}`)) return; // the first point per group and rule is enough
    reported.add(`${rule} ${g.grant}`);
    out.push({ rule, message, events });
  };
  for (const p of sorted) {
    if (p.type !== 'write' && p.type !== 'alive') continue;
    const g = byId.get(p.grant);
    if (!g || !attended(g, p.t)) continue;
    const following = next.get(g.grant);
    const exit = exits.get(g.grant);
    const released = exit && releasedAtExit(exit) ? exit : undefined;
    const afterNext = following !== undefined && p.t > following.t + KILL_SLACK_MS;
    if (p.type === 'write' && p.result === 'accepted' && afterNext) {
      report(
        'group-write-after-grant',
        g,
        describe(g, p, `after ${following.grant} (token ${following.token}) was granted`),
        [g, following, p],
      );
    }
    if (released && p.t > released.t) {
      const what = `after its CLI released and exited (${released.code})`;
      report('released-while-alive', g, describe(g, p, what), [g, released, p]);
    } else if (following && afterNext) {
      report('released-while-alive', g, describe(g, p, `after ${following.grant} was granted`), [
        g,
        following,
        p,
      ]);
    }
  }
  return out;
}

/** The CLI released before it exited: it ended on its own with neither 71 (left without releasing) nor a signal. */
export function releasedAtExit(exit: CliExit): boolean {
  return exit.signal === null && exit.code !== 71;
}

function describe(g: Grant, p: Write | Alive, what: string): string {
  const act = p.type === 'write' ? `a write (${p.result})` : `${p.member} was alive`;
  return `${g.key}: group ${g.grant} (token ${g.token}): ${act} ${(p.t - g.t).toFixed(0)} ms into the grant, ${what}`;
}
