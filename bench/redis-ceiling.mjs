// The most hand-overs per second any Redis client could make on this machine: a token passed round
// a ring of connections, one PUBLISH per hand-over, its message reaching the next holder on another
// connection. No lock, no script, no queue: a lock that hands over by a message through Redis sends
// at least this much per hand-over (fencekit sends two scripts and a PUBLISH), so its rate stays
// below the ring's, and a target above the ring's rate is out of reach for any such client here.
import { Redis } from 'ioredis';

/** Hand-overs per second round a ring of `connections` for `ms`. */
export async function redisRingCeiling(url, connections, ms) {
  const senders = Array.from({ length: connections }, () => new Redis(url));
  const listeners = Array.from({ length: connections }, () => new Redis(url));
  const channel = (i) => `bench/ring/${process.pid}/${i % connections}`;
  try {
    await Promise.all(listeners.map((l, i) => l.subscribe(channel(i))));
    let handOvers = 0;
    let running = true;
    for (const [i, listener] of listeners.entries()) {
      listener.on('message', () => {
        if (!running) return;
        handOvers++;
        senders[i].publish(channel(i + 1), '');
      });
    }
    const started = performance.now();
    await senders[0].publish(channel(1), '');
    await new Promise((r) => setTimeout(r, ms));
    running = false;
    return handOvers / ((performance.now() - started) / 1_000);
  } finally {
    for (const c of [...senders, ...listeners]) c.disconnect();
  }
}
