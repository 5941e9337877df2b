import net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { FrameDecoder } from '../../adapters/zookeeper/wire/frames.js';
import { JuteReader, JuteWriter, WireError } from '../../adapters/zookeeper/wire/jute.js';
import { decodeMulti, readStat } from '../../adapters/zookeeper/wire/ops.js';
import { BackendUnavailableError } from '../../src/index.js';

const frame = (payload: Buffer) => new JuteWriter().buffer(payload).frame().subarray(4);

describe('jute codec', () => {
  it('reads back what it wrote', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        fc.boolean(),
        fc.string(),
        fc.array(fc.string(), { maxLength: 20 }),
        (i, l, b, s, v) => {
          const bytes = new JuteWriter()
            .int(i)
            .long(l)
            .bool(b)
            .string(s)
            .vector(v, (w, x) => w.string(x))
            .frame();
          const r = new JuteReader(bytes.subarray(4));
          expect([r.int(), r.long(), r.bool(), r.string(), r.vector((x) => x.string())]).toEqual([
            i,
            l,
            b,
            s,
            v,
          ]);
          expect(r.remaining).toBe(0);
        },
      ),
    );
  });

  it('garbage or truncated records throw WireError, never read past the end', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const buf = Buffer.from(bytes);
        for (const read of [
          (r: JuteReader) => readStat(r),
          (r: JuteReader) => r.vector((x) => x.string()),
          (r: JuteReader) => decodeMulti(r, (p) => p),
        ]) {
          try {
            read(new JuteReader(buf));
          } catch (error) {
            expect(error).toBeInstanceOf(WireError);
          }
        }
      }),
    );
  });
});

describe('frame decoder', () => {
  it('reassembles frames however the stream is cut', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 10 }),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 30 }),
        (payloads, cuts) => {
          const stream = Buffer.concat(payloads.map((p) => new JuteWriter().buffer(Buffer.from(p)).frame()));
          const decoder = new FrameDecoder();
          const out: Buffer[] = [];
          for (let at = 0, i = 0; at < stream.length; i++) {
            const n = cuts[i % cuts.length] as number;
            out.push(...decoder.push(stream.subarray(at, at + n)));
            at += n;
          }
          // Each frame's payload is itself a jute buffer here.
          expect(out.map((f) => Buffer.from(new JuteReader(f).buffer() ?? []))).toEqual(
            payloads.map((p) => Buffer.from(p)),
          );
          expect(decoder.buffered).toBe(0);
        },
      ),
    );
  });

  it('a length outside bounds is a stream out of sync: WireError', () => {
    const decoder = new FrameDecoder(1024);
    expect(() => decoder.push(Buffer.from([0xff, 0xff, 0xff, 0xfe]))).toThrow(WireError);
    expect(() => new FrameDecoder(1024).push(Buffer.from([0, 0, 8, 0]))).toThrow(WireError);
    expect(frame(Buffer.alloc(0)).length).toBe(4);
  });
});

/** A fake server on a loopback port that answers every connection with `reply`. */
async function fakeServer(reply: (socket: net.Socket, request: Buffer) => void): Promise<net.Server> {
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', (request) => reply(socket, request));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return server;
}
const portOf = (server: net.Server) => (server.address() as net.AddressInfo).port;
const connectResponse = () =>
  new JuteWriter().int(0).int(4_000).long(0x1234n).buffer(Buffer.alloc(16, 7)).bool(false).frame();

describe('a server that sends garbage', () => {
  const servers: net.Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await new Promise((ok) => s.close(ok));
  });

  it('garbage instead of a handshake: BackendUnavailableError from acquire, no crash', async () => {
    const server = await fakeServer((socket) => socket.end(Buffer.from('HTTP/1.1 400 Bad Request\r\n\r\n')));
    servers.push(server);
    const provider = new ZooKeeperLockProvider({
      connectString: `127.0.0.1:${portOf(server)}`,
      callTimeoutMs: 1_000,
    });
    try {
      const started = performance.now();
      const error = await provider.acquire('k', { waitMs: 2_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      await provider.close();
    }
  });

  it('random bytes after a valid handshake end the connection, never the process (200 rounds)', async () => {
    let garbage: Buffer = Buffer.alloc(0);
    const server = await fakeServer((socket) => {
      socket.write(connectResponse());
      socket.on('data', () => socket.write(garbage));
    });
    servers.push(server);
    const samples = fc.sample(fc.uint8Array({ minLength: 1, maxLength: 64 }), 200);
    for (const sample of samples) {
      // A plausible reply header with a random tail, or bytes that are all random.
      garbage =
        sample.length % 2 === 0
          ? Buffer.concat([
              new JuteWriter()
                .int(1)
                .long(5n)
                .int(sample[0] ?? 0)
                .frame(),
              Buffer.from(sample),
            ])
          : Buffer.from(sample);
      const client = await ZkClient.connect(
        { connectString: `127.0.0.1:${portOf(server)}`, sessionTimeoutMs: 4_000, callTimeoutMs: 300 },
        { timeoutMs: 1_000 },
      );
      const outcome = await client.getChildren('/').then(
        () => 'answered',
        (e: Error) => e.name,
      );
      expect(['answered', 'CONNECTION_LOSS', 'OPERATION_TIMEOUT', 'NO_NODE']).toContain(
        /^UNKNOWN_|^[A-Z_]+$/.test(outcome) && !['CONNECTION_LOSS', 'OPERATION_TIMEOUT'].includes(outcome)
          ? 'NO_NODE' // any server error code, known or not, is a rejection with its name
          : outcome,
      );
      await client.close();
    }
  }, 60_000);
});
