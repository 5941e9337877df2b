// npm run bench [name…] [-- --chart]: each benchmark prints its table(s); with no names, all of
// them. --chart: those that draw charts write them into docs/benchmarks/.
import { benchEtcd } from './etcd.mjs';
import { benchFailover } from './failover.mjs';
import { benchIdempotency } from './idempotency.mjs';
import { benchMemory } from './memory.mjs';
import { benchNames } from './names.mjs';
import { benchPostgres } from './postgres.mjs';
import { benchFacade, benchRedis } from './redis.mjs';
import { benchScale } from './scale.mjs';
import { benchSemaphore } from './semaphore.mjs';
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
