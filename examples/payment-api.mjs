// The payment story end to end: a card processor that cannot check fencing tokens, behind an HTTP
// endpoint guarded by an Idempotency-Key, and a client that gives up after 300 ms and retries.
// However many retries, the card is charged once; the ledger write is also fenced by the lock.
// Run: npm run build && node examples/payment-api.mjs [store url] [lock url]
//   (defaults: memory:// for both; e.g. postgres://… or redis://… for a shared store)
import express from 'express';
import { connect, FencedStore } from 'fencekit';
import { createIdempotencyStore, idempotencyMiddleware } from 'fencekit/idempotency';

const [storeUrl = 'memory://', lockUrl = 'memory://'] = process.argv.slice(2);

// The processor is slow the first time (a slow network, a busy gateway): longer than the client waits.
const processor = { charges: [], calls: 0 };
async function chargeCard(card, amountCents) {
  processor.calls++;
  await new Promise((r) => setTimeout(r, processor.calls === 1 ? 600 : 20));
  const id = `ch_${processor.charges.length + 1}`;
  processor.charges.push({ id, card, amountCents });
  return id;
}

const ledger = new FencedStore();
const locks = await connect(lockUrl);
const store = await createIdempotencyStore(storeUrl);

const app = express();
app.use(express.json());
app.use(idempotencyMiddleware(store, { leaseMs: 10_000, waitMs: 2_000 }));
app.post('/orders/:id/pay', async (req, res) => {
  const order = req.params.id;
  const result = await locks.withLock(
    `orders/${order}`,
    async (lock) => {
      const charge = await chargeCard(req.body.card, req.body.amountCents);
      ledger.write(`order/${order}`, { charge, status: 'paid' }, lock.fencingToken); // fenced
      return { order, charge, status: 'paid' };
    },
    { ttlMs: 10_000, waitMs: 5_000 },
  );
  res.status(201).json(result);
});
const server = await new Promise((resolve) => {
  const s = app.listen(0, '127.0.0.1', () => resolve(s));
});
const base = `http://127.0.0.1:${server.address().port}`;

// The client: one key per payment, the same key on every retry.
async function pay(order, body) {
  const key = crypto.randomUUID();
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      const res = await fetch(`${base}/orders/${order}/pay`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(300),
      });
      const replayed = res.headers.get('idempotency-replayed') === 'true';
      console.log(`attempt ${attempt}: ${res.status}${replayed ? ' (replayed)' : ''}`, await res.text());
      if (res.status !== 409) return;
    } catch (error) {
      console.log(
        `attempt ${attempt}: ${error.name === 'TimeoutError' ? 'timed out, retrying' : error.message}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100 * attempt));
  }
}

await pay('42', { card: '4242', amountCents: 4200 });
console.log(`card charged ${processor.charges.length} time(s); ledger:`, ledger.read('order/42'));
server.close();
await store.close();
await locks.close();
