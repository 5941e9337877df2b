// A routing table that every request reads and a deploy rewrites, under one read-write lock:
// 8 readers look the table up in a loop while a writer replaces it twice. Readers share; the
// writer waits for the readers before it, and readers who ask after it wait for it, so the writer
// is never starved and no reader ever sees a half-written table. Each write stores the writer's
// fencing token with the table: a write with an older token is refused, as a storage would.
//
// Run: npm run build && node examples/config-routes.mjs [url]    (default: memory://; etcd:// and redis:// work too)
import { connect } from 'fencekit';

const url = process.argv[2] ?? 'memory://';
const provider = await connect(url);
if (!provider.readWriteLock) throw new Error(`${provider.backend}: no read-write locks`);
const routes = provider.readWriteLock(`example/config-routes/${Date.now()}`);

/** The "storage": a table and the token of the write that made it. */
const table = { version: 0, routes: { '/': 'v0' }, fencingToken: 0n };
let torn = 0;
let reads = 0;
let stop = false;

async function reader(id) {
  while (!stop) {
    await routes.withRead(
      async () => {
        const seen = table.version;
        await new Promise((resolve) => setTimeout(resolve, 2));
        if (table.routes['/'] !== `v${seen}`) torn += 1; // a writer got in while we read
        reads += 1;
      },
      { owner: `reader-${id}`, waitMs: 10_000 },
    );
  }
}

async function deploy(version) {
  await routes.withWrite(
    async (write) => {
      if (write.fencingToken <= table.fencingToken) throw new Error('stale writer refused');
      table.routes = {}; // half-written for a moment: readers must not see this
      await new Promise((resolve) => setTimeout(resolve, 20));
      table.routes['/'] = `v${version}`;
      table.version = version;
      table.fencingToken = write.fencingToken;
      console.log(`deploy v${version} with token ${write.fencingToken} (${reads} reads so far)`);
    },
    { owner: 'deploy', waitMs: 10_000 },
  );
}

const readers = Array.from({ length: 8 }, (_, id) => reader(id));
await new Promise((resolve) => setTimeout(resolve, 50));
await deploy(1);
await deploy(2);
stop = true;
await Promise.all(readers);
console.log(`${reads} reads, ${torn} torn, table at v${table.version}`);
await provider.close();
if (torn > 0) process.exitCode = 1;
