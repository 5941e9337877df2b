// A per-tenant limiter in front of a shared worker pool: 20 workers, tenant A floods 1,000 jobs,
// tenants B–E send 10 each, at most 2 jobs of a tenant run at once (across every process that uses
// the same URL). A worker never blocks on a busy tenant: it tries the tenant's semaphore without
// waiting and moves on to another tenant, so B–E finish at once instead of behind A's backlog.
//
// Run: npm run build && node examples/tenant-limiter.mjs [url]    (default: memory://)
import { connect, createTenantLimiter } from 'fencekit';

const url = process.argv[2] ?? 'memory://';
const JOB_MS = Number(process.env.JOB_MS ?? 5);
const provider = await connect(url);
const limiter = createTenantLimiter(provider, { limit: 2, prefix: `example/tenants/${Date.now()}/` });

/** Pending jobs per tenant, FIFO; A's backlog is enqueued first. */
const pending = new Map([
  ['A', 1_000],
  ['B', 10],
  ['C', 10],
  ['D', 10],
  ['E', 10],
]);
const running = new Map([...pending.keys()].map((t) => [t, 0]));
const peak = new Map([...pending.keys()].map((t) => [t, 0]));
const finishedAt = new Map();
const done = new Map([...pending.keys()].map((t) => [t, 0]));
const started = performance.now();
const now = () => Math.round(performance.now() - started);
const timeline = [];
const snapshot = () =>
  timeline.push(`${String(now()).padStart(6)} ms  ${[...running].map(([t, n]) => `${t}:${n}`).join(' ')}`);
const sampler = setInterval(snapshot, 10);

async function job(tenant) {
  running.set(tenant, running.get(tenant) + 1);
  peak.set(tenant, Math.max(peak.get(tenant), running.get(tenant)));
  await new Promise((r) => setTimeout(r, JOB_MS));
  running.set(tenant, running.get(tenant) - 1);
  done.set(tenant, done.get(tenant) + 1);
  if (pending.get(tenant) === 0 && running.get(tenant) === 0 && !finishedAt.has(tenant)) {
    finishedAt.set(tenant, now());
  }
}

async function worker() {
  let turn = 0;
  for (;;) {
    const tenants = [...pending].filter(([, n]) => n > 0).map(([t]) => t);
    if (tenants.length === 0) return;
    let ran = false;
    // Round robin over tenants with work; a tenant at its limit is skipped, not waited for.
    for (let i = 0; i < tenants.length && !ran; i++) {
      const tenant = tenants[(turn + i) % tenants.length];
      if (pending.get(tenant) === 0) continue;
      pending.set(tenant, pending.get(tenant) - 1);
      try {
        await limiter.run(tenant, () => job(tenant), { waitMs: 0, ttlMs: 5_000 });
        ran = true;
      } catch (error) {
        pending.set(tenant, pending.get(tenant) + 1); // not run: back to its queue
        if (error.code !== 'LOCK_TIMEOUT') throw error;
      }
    }
    turn += 1;
    if (!ran) await new Promise((r) => setTimeout(r, 2)); // every tenant with work is at its limit
  }
}

await Promise.all(Array.from({ length: 20 }, worker));
clearInterval(sampler);
snapshot();
await provider.close();

console.log('running jobs per tenant (sampled every 10 ms: the first six samples, then every 500 ms):');
timeline.forEach((line, i) => {
  if (i < 6 || i % 50 === 49 || i === timeline.length - 1) console.log(line);
});
console.log('\ntenant  jobs  finished at  most at once');
for (const tenant of done.keys()) {
  console.log(
    `${tenant.padEnd(6)}  ${String(done.get(tenant)).padStart(4)}  ${String(finishedAt.get(tenant)).padStart(8)} ms  ${peak.get(tenant)}`,
  );
}
const others = ['B', 'C', 'D', 'E'].map((t) => finishedAt.get(t));
console.log(
  `\nB–E were done after ${Math.max(...others)} ms, while A's backlog took ${finishedAt.get('A')} ms.`,
);
