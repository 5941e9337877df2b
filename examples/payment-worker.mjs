// A payment worker that cannot double-charge: the lock keeps the workers apart while they are
// healthy, and the fencing token lets the store reject a worker that was paused past its lease.
// Run: npm run build && node examples/payment-worker.mjs [url]   (default: the embedded memory provider)
import { connect, FencedStore, StaleFencingTokenError } from 'fencekit';

const payments = new FencedStore();

async function chargeOrder(url, orderId, amountCents) {
  const locks = await connect(url);
  try {
    await locks.withLock(
      `orders/${orderId}`,
      async (lock) => {
        lock.signal.throwIfAborted(); // lost the lock before we started: do nothing
        // The write carries the token; the store refuses it if a newer holder already wrote.
        payments.write(`order/${orderId}`, { amountCents }, lock.fencingToken);
      },
      { ttlMs: 10_000, waitMs: 5_000, owner: `payment-worker pid ${process.pid}` },
    );
  } catch (error) {
    if (error instanceof StaleFencingTokenError) return; // a newer holder did it: nothing to do
    throw error;
  } finally {
    await locks.close();
  }
}

await chargeOrder(process.argv[2] ?? 'memory://', '42', 4200);
console.log('charged order 42:', payments.read('order/42'), 'token', payments.highestToken('order/42'));
