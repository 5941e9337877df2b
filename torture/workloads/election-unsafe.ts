import type { Election, LeaderInfo, Leadership } from 'fencekit';

/**
 * Control runs: an election that breaks one promise on purpose, to prove the checker can go red.
 * - 'two-leaders': every other campaign hands out a Leadership at once, with a fresh term above the
 *   current leader's, while that leader still holds its own (rule overlap).
 * - 'stale-observe': observe() replays a report it made long ago, whose term has ended since.
 * - 'no-failover' changes the candidates' loop instead (see election.ts): nobody waits in line.
 */
export function unsafeElection(real: Election, unsafety: string, random: () => number): Election {
  if (unsafety === 'two-leaders') return twoLeaders(real);
  if (unsafety === 'stale-observe') return replaying(real, random);
  return real;
}

function twoLeaders(real: Election): Election {
  let campaigns = 0;
  let lastFake = 0n;
  return {
    name: real.name,
    leader: () => real.leader(),
    observe: (opts) => real.observe(opts),
    async campaign(value, opts) {
      if (++campaigns % 2 === 1) return real.campaign(value, opts);
      const current = (await real.leader())?.term ?? 0n;
      lastFake = (current > lastFake ? current : lastFake) + 1n;
      return fakeLeadership(real.name, lastFake);
    },
  };
}

function fakeLeadership(name: string, term: bigint): Leadership {
  const controller = new AbortController();
  const end = async () => controller.abort(new Error('resigned'));
  return {
    name,
    term,
    signal: controller.signal,
    proclaim: async () => undefined,
    resign: end,
    [Symbol.asyncDispose]: end,
  };
}

/** After some reports, yields again the oldest leader it reported (once it is 6 s old). */
function replaying(real: Election, random: () => number): Election {
  return {
    name: real.name,
    leader: () => real.leader(),
    campaign: (value, opts) => real.campaign(value, opts),
    async *observe(opts) {
      let oldest: { info: LeaderInfo; at: number } | undefined;
      for await (const info of real.observe(opts)) {
        yield info;
        if (info && !oldest) oldest = { info, at: performance.now() };
        if (oldest && performance.now() - oldest.at > 6_000 && random() < 0.5) {
          yield oldest.info;
          oldest = undefined;
        }
      }
    },
  };
}
