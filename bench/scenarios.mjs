// Lock scenarios shared by the backend benchmarks; `open()` returns a new client of the backend.

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** p50/p99 of latencies in µs. */
export function stats(samples) {
  const xs = [...samples].sort((x, y) => x - y);
  return { p50: xs[xs.length >> 1], p99: xs[Math.floor(xs.length * 0.99)] };
}

/** From the holder's release() until another, already waiting client holds; in µs. */
export async function handoffSamples(open, key, trials = 300) {
  const [a, b] = [await open(), await open()];
  const samples = [];
  let holder = await a.acquire(key);
  let [current, other] = [a, b];
  for (let i = 0; i < trials; i++) {
    const waiting = other.acquire(key);
    while (((await current.inspect(key))?.waiters ?? 0) < 1) await sleep(0);
    await sleep(20); // let the waiter settle into its wait: measure the handoff, not the queueing
    const start = process.hrtime.bigint();
    await holder.release();
    holder = await waiting;
    samples.push(Number(process.hrtime.bigint() - start) / 1_000);
    [current, other] = [other, current];
  }
  await holder.release();
  await Promise.all([a.close(), b.close()]);
  return samples;
}

/** Wake-ups per handoff with 1, 10 and 100 waiters, each a separate client (1.00 = no herd). */
export async function printHerd(title, open) {
  console.log(`\n${title}, wake-ups per handoff (each waiter a separate client)`);
  console.log(
    `${'waiters'.padEnd(10)} ${'handoffs'.padStart(10)} ${'wake-ups'.padStart(10)} ${'per handoff'.padStart(12)}`,
  );
  for (const n of [1, 10, 100]) {
    const key = `bench/herd/${n}`;
    const holder = await open();
    const waiters = await Promise.all(Array.from({ length: n }, () => open()));
    let lock = await holder.acquire(key);
    const granted = [];
    const all = waiters.map((w) => w.acquire(key).then((l) => granted.push(l)));
    while (((await holder.inspect(key))?.waiters ?? 0) < n) await sleep(5);
    await sleep(200);
    await lock.release();
    for (let i = 0; i < n; i++) {
      while (granted.length <= i) await sleep(0);
      lock = granted[i];
      await lock.release();
    }
    await Promise.all(all);
    const wakeups = waiters.reduce((sum, w) => sum + w.wakeups, 0);
    console.log(
      `${String(n).padEnd(10)} ${String(n).padStart(10)} ${String(wakeups).padStart(10)} ${(wakeups / n).toFixed(2).padStart(12)}`,
    );
    await Promise.all([holder, ...waiters].map((p) => p.close()));
  }
}

/** MB of heap one client uses for `count` held locks (needs node --expose-gc). */
export async function printHeapForLocks(title, open, count = 10_000) {
  const gc = globalThis.gc;
  if (!gc) {
    console.log('\n(memory: run with node --expose-gc to measure)');
    return;
  }
  const provider = await open();
  await (await provider.acquire('bench/memory/warmup')).release();
  gc();
  const before = process.memoryUsage().heapUsed;
  const locks = [];
  for (let i = 0; i < count; i += 100) {
    locks.push(
      ...(await Promise.all(
        Array.from({ length: 100 }, (_, j) => provider.acquire(`bench/memory/${i + j}`)),
      )),
    );
  }
  gc();
  const after = process.memoryUsage().heapUsed;
  console.log(
    `\n${title}, client heap for ${locks.length} held locks: ${((after - before) / 1024 / 1024).toFixed(1)} MB`,
  );
  await provider.close();
}

/** Each of `clients` contenders (a separate client each) loops acquire + release for ms; grants per client. */
export async function contendGrants(open, key, clients = 10, ms = 3_000) {
  const providers = await Promise.all(Array.from({ length: clients }, () => open()));
  const counts = providers.map(() => 0);
  const stopAt = performance.now() + ms;
  await Promise.all(
    providers.map(async (provider, i) => {
      while (performance.now() < stopAt) {
        const lock = await provider.acquire(key);
        await lock.release();
        counts[i] += 1;
      }
    }),
  );
  await Promise.all(providers.map((p) => p.close()));
  return counts;
}
