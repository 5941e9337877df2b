// A daily report on three replicas: every replica schedules it, exactly one runs each day's tick.
// For a quick look, REPORT_EVERY_MS=1000 runs a tick every second instead of the cron schedule.
//
// Run: npm run build && node examples/daily-report.mjs [url]    (default: memory://, 3 replicas in one process)
import { connect, runSingleton } from 'fencekit';

const url = process.argv[2] ?? 'memory://';
const every = process.env.REPORT_EVERY_MS
  ? { everyMs: Number(process.env.REPORT_EVERY_MS) }
  : { cron: '0 7 * * *' };
const stop = new AbortController();
setTimeout(() => stop.abort(), Number(process.env.RUN_FOR_MS ?? 3_500)).unref?.();

const replicas = ['replica-a', 'replica-b', 'replica-c'];
const providers = await Promise.all(replicas.map(() => connect(url)));
await Promise.all(
  replicas.map((replica, i) =>
    runSingleton(
      providers[i],
      'reports/daily',
      async ({ tick, term }) => {
        console.log(`${replica} sends the report for ${tick.toISOString()} (token ${term})`);
      },
      {
        ...every,
        replica,
        signal: stop.signal,
        onMissed: (tick) => console.error(`no replica ran the report for ${tick.toISOString()}`),
      },
    ),
  ),
);
await Promise.all(providers.map((p) => p.close()));
