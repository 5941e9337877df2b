// A script that uses a facade as an app would, then quits its Redis client and closes nothing else
// (no quit() on the facade). It imports the built package, as users do. argv: url facade layout
// ending ('released', or 'held': the locks are left held, as a script that forgets does).
import { Redis } from 'ioredis';
import { Mutex, Semaphore } from '../../dist/compat/redis-semaphore.js';
import { Redlock } from '../../dist/compat/redlock.js';

const [url, facade, layout, ending] = process.argv.slice(2);
const held = ending === 'held';
const client = new Redis(url);
const name = `exit-${process.pid}`;
// Leases far longer than the test's bound: a process kept alive until they end does not pass.
const options = { lockTimeout: 60_000, ...(layout === 'fencekit' ? { layout } : {}) };
if (facade === 'redlock') {
  const redlock = new Redlock([client], layout === 'fencekit' ? { layout } : {});
  const lock = await redlock.acquire([name], 60_000);
  if (!held) await lock.release();
} else {
  const mutex = new Mutex(client, name, options);
  await mutex.acquire();
  if (!held) await mutex.release();
  const semaphore = new Semaphore(client, name, 2, options);
  await semaphore.acquire();
  if (!held) await semaphore.release();
}
await client.quit();
console.log(`${ending} and quit`);
