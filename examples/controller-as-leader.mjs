// A control-plane controller that reconciles only while it leads. Run it on several replicas with
// the same URL: one reconciles, the others wait; stop the leader (Ctrl-C) and another takes over at
// once, because stopping resigns first.
//
// Run: npm run build && node examples/controller-as-leader.mjs [url]    (default: memory://)
import { connect, runAsLeader } from 'fencekit';

const url = process.argv[2] ?? 'memory://';
const locks = await connect(url);
const stop = new AbortController();
setTimeout(() => stop.abort(), Number(process.env.RUN_FOR_MS ?? 3_000)).unref?.();

await runAsLeader(
  locks,
  'controllers/orders',
  async ({ signal, term }) => {
    console.log(`elected: term ${term}; reconciling until the term ends`);
    while (!signal.aborted) {
      // Writes carry the term, so a deposed leader's late write is refused by the storage.
      console.log(`reconcile pass (term ${term})`);
      await new Promise((r) => setTimeout(r, 500));
    }
    console.log(`term ${term} over: ${signal.reason?.message ?? 'stopped'}`);
  },
  {
    signal: stop.signal,
    handleSignals: true,
    onLeaderChange: (leader) => console.log(`leader now: ${leader ? leader.value : 'nobody'}`),
    onError: (error) => console.error(`election error (retrying): ${error.message}`),
  },
);
await locks.close();
