// npm run bench [name…] [-- --chart]: each benchmark prints its table(s); with no names, all of
// them. --chart: those that draw charts write them into docs/benchmarks/, and this file draws the
// uncontended tables of the backends it ran as bars of each case's p50 over its floor's.
import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { barChart } from './chart.mjs';
import { benchEtcd } from './etcd.mjs';
import { benchFailover } from './failover.mjs';
import { benchIdempotency } from './idempotency.mjs';
import { benchMemory } from './memory.mjs';
import { benchNames } from './names.mjs';
import { benchPostgres } from './postgres.mjs';
import { benchFacade, benchRedis } from './redis.mjs';
import { benchScale } from './scale.mjs';
import { benchSemaphore } from './semaphore.mjs';
import { printedTables } from './table.mjs';
import { benchTenantIsolation } from './tenant-isolation.mjs';
import { benchZooKeeper } from './zookeeper.mjs';

const all = {
  memory: benchMemory,
  etcd: benchEtcd,
  postgres: benchPostgres,
  redis: benchRedis,
  facade: benchFacade,
  zookeeper: benchZooKeeper,
  failover: benchFailover,
  semaphore: benchSemaphore,
  idempotency: benchIdempotency,
  tenants: benchTenantIsolation,
  scale: benchScale,
  names: benchNames,
};
const chosen = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
for (const [name, run] of Object.entries(all)) {
  if (chosen.length === 0 || chosen.includes(name)) await run();
}

if (process.argv.includes('--chart')) await writeFloorChart();

/** docs/benchmarks/latency-vs-floor.svg: per backend, each uncontended case's p50 ÷ the floor's. */
async function writeFloorChart() {
  const groups = printedTables
    .filter(({ title }) => /uncontended acquire \+ release/.test(title))
    .map(({ title, rows }) => ({
      name: title.split(',')[0],
      // The first row of each such table is its floor (bench/table.mjs printTable).
      bars: rows.map((row) => ({ name: shortName(row.name), value: row.p50 / rows[0].p50 })),
    }));
  if (groups.length === 0) return; // no backend's uncontended table ran
  const when = new Date().toISOString().slice(0, 10);
  const dir = resolve(import.meta.dirname, '../docs/benchmarks');
  await mkdir(dir, { recursive: true });
  const file = resolve(dir, 'latency-vs-floor.svg');
  await writeFile(
    file,
    barChart({
      title: `Uncontended acquire + release, p50 ÷ the backend's floor (${when})`,
      yLabel: '× floor (p50)',
      groups,
      reference: 1,
      cap: 4, // a package many times slower than its floor would flatten every other bar
    }),
  );
  console.log(`chart written to ${file}`);
}

/** A case's name, cut short enough to stand under a bar. */
function shortName(name) {
  return name.length > 30 ? `${name.slice(0, 29)}…` : name;
}
