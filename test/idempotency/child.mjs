// A client process for the idempotency process tests (imports the built package, as users do).
// argv: url key mode [options JSON]. Prints one JSON line per event.
import { createInterface } from 'node:readline';
import { createIdempotencyStore } from '../../dist/idempotency.js';

const [url, key, mode, optionsJson = '{}'] = process.argv.slice(2);
const options = JSON.parse(optionsJson);
const say = (event) => console.log(JSON.stringify({ pid: process.pid, ...event }));
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const nextLine = async () => (await lines.next()).value;
const outcome = (p) =>
  p.then(
    (value) => say({ result: value }),
    (error) => say({ error: error.code ?? String(error) }),
  );

if (mode === 'burst') {
  // `count` requests, each on its own store and so its own connection, released together on "go".
  const stores = await Promise.all(
    Array.from({ length: options.count }, () => createIdempotencyStore(url, { maxConnections: 1 })),
  );
  say({ ready: true });
  await nextLine();
  await Promise.all(
    stores.map((store) =>
      outcome(
        store.run(
          key,
          { order: 42, cents: 4200 },
          async ({ fencingToken }) => {
            say({ ran: String(fencingToken) });
            await new Promise((r) => setTimeout(r, 300));
            return { charge: `ch_${process.pid}_${fencingToken}` };
          },
          { waitMs: options.waitMs ?? 0, leaseMs: 5_000 },
        ),
      ),
    ),
  );
  await Promise.all(stores.map((s) => s.close()));
} else if (mode === 'stall') {
  // Begins the run, reports its token, then finishes only when told to (after a kill or a pause).
  const store = await createIdempotencyStore(url);
  await outcome(
    store.run(
      key,
      'payment',
      async ({ fencingToken, signal }) => {
        say({ ran: String(fencingToken) });
        await nextLine();
        say({ resumedWithSignalAborted: signal.aborted });
        return 'zombie';
      },
      { leaseMs: options.leaseMs },
    ),
  );
  await store.close();
}
process.exit(0);
