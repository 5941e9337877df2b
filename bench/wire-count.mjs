// A bench-only TCP proxy in front of one ZooKeeper server that counts what crosses it: requests by
// op code, replies, and round trips (a burst of client frames sent after the last reply counts one).
// Pings, handshakes and watch notifications are left out, so the counts are those of the calls.
import net from 'node:net';

const OPS = {
  1: 'create',
  2: 'delete',
  3: 'exists',
  4: 'getData',
  8: 'getChildren',
  12: 'getChildren2',
  13: 'check',
  14: 'multi',
  15: 'create2',
  19: 'createContainer',
};

/** Splits a byte stream into ZooKeeper frames (4-byte length prefix); calls onFrame(payload). */
function framer(onFrame) {
  let pending = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
      const length = pending.readInt32BE(0);
      onFrame(pending.subarray(4, 4 + length));
      pending = pending.subarray(4 + length);
    }
  };
}

export async function startWireCounter(target) {
  const [host, port] = target.split(':');
  const counts = { requests: {}, replies: 0, roundTrips: 0 };
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host, port: Number(port) });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    let handshakeUp = true;
    let handshakeDown = true;
    let replied = true; // the next client frame after a reply starts a round trip
    const up = framer((frame) => {
      if (handshakeUp) {
        handshakeUp = false;
        return;
      }
      const xid = frame.readInt32BE(0);
      if (xid < 0) return; // ping, auth, setWatches
      const op = OPS[frame.readInt32BE(4)] ?? `op ${frame.readInt32BE(4)}`;
      counts.requests[op] = (counts.requests[op] ?? 0) + 1;
      if (replied) counts.roundTrips += 1;
      replied = false;
    });
    const down = framer((frame) => {
      if (handshakeDown) {
        handshakeDown = false;
        return;
      }
      if (frame.readInt32BE(0) < 0) return; // ping reply, notification
      counts.replies += 1;
      replied = true;
    });
    client.on('data', (chunk) => {
      up(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      down(chunk);
      client.write(chunk);
    });
    sockets.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    connectString: `127.0.0.1:${server.address().port}`,
    /** Counts since the last reset. */
    take() {
      const out = structuredClone(counts);
      counts.requests = {};
      counts.replies = 0;
      counts.roundTrips = 0;
      return out;
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
