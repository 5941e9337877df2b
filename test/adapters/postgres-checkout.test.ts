import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkOut } from '../../adapters/postgres/checkout.js';

// A backend terminated (pg_terminate_backend) right after it said ReadyForQuery sends that and a
// FATAL ErrorResponse in one TCP chunk. The torture suite found it killing workers: pg-pool drops
// its own 'error' listener when it hands the client over, and the checkout's listener came a
// promise step later, after the parser had already emitted 'error' to nobody. A real server cannot
// be made to put both messages in one chunk on demand, so a fake one speaks the few bytes of it.

/** One message of the protocol: type byte, int32 length (itself included), body. */
function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}
const authenticationOk = message('R', Buffer.from([0, 0, 0, 0]));
const readyForQuery = message('Z', Buffer.from('I', 'latin1'));
const terminated = message(
  'E',
  Buffer.concat([
    Buffer.from('SFATAL\0', 'latin1'),
    Buffer.from('C57P01\0', 'latin1'),
    Buffer.from('Mterminating connection due to administrator command\0', 'latin1'),
    Buffer.from([0]),
  ]),
);

describe('postgres checkout: a backend terminated as it becomes ready', () => {
  let server: net.Server;
  let port: number;
  const sockets = new Set<net.Socket>();
  beforeAll(async () => {
    server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      // The startup message: answer it with ready and terminated in a single write.
      socket.once('data', () => socket.write(Buffer.concat([authenticationOk, readyForQuery, terminated])));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('the FATAL that follows ReadyForQuery in the same chunk marks the checkout lost, not the process dead', async () => {
    // Old code: the 'error' reached no listener (uncaught here, a crash in an app).
    const pool = new pg.Pool({ host: '127.0.0.1', port, user: 'u', database: 'd', max: 1 });
    pool.on('error', () => undefined);
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const checkout = await checkOut(pool, 5_000);
      const lost = await new Promise<boolean>((resolve) => {
        checkout.onLost(() => resolve(true));
        setTimeout(() => resolve(false), 5_000);
      });
      expect(uncaught).toEqual([]);
      expect(lost).toBe(true);
      checkout.discard();
    } finally {
      process.off('uncaughtException', onUncaught);
      await pool.end().catch(() => undefined);
    }
  });
});
