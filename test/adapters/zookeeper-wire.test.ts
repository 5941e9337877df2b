import net from 'node:net';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { FrameDecoder } from '../../adapters/zookeeper/wire/frames.js';
import { JuteReader, JuteWriter, WireError } from '../../adapters/zookeeper/wire/jute.js';
import { CreateMode, decodeMulti, OPEN_ACL_UNSAFE, readStat } from '../../adapters/zookeeper/wire/ops.js';
import { BackendUnavailableError } from '../../src/index.js';
import { eventually } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

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

  it('random bytes after a valid handshake end the connection, never the process (100 rounds)', async () => {
    let garbage: Buffer = Buffer.alloc(0);
    const server = await fakeServer((socket) => {
      socket.write(connectResponse());
      socket.on('data', () => socket.write(garbage));
    });
    servers.push(server);
    const samples = fc.sample(fc.uint8Array({ minLength: 1, maxLength: 64 }), 100);
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

describe('ZkClient on a real server', () => {
  let zk: ServerGroup;
  let connectString: string;
  const clients: ZkClient[] = [];
  const open = async (connect = connectString) => {
    const client = await ZkClient.connect(
      { connectString: connect, sessionTimeoutMs: 4_000, callTimeoutMs: 2_000 },
      { timeoutMs: 5_000 },
    );
    clients.push(client);
    return client;
  };
  beforeAll(async () => {
    zk = await startServers('zookeeper');
    connectString = endpoint(zk, 'ZK_CONNECT');
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await zk?.stop();
  });

  it('create2, getChildren2, getData, setData, sync, delete with version; errors by name', async () => {
    const client = await open();
    const base = `/wire-${crypto.randomUUID()}`;
    await client.mkdirp(base);
    const { path, stat } = await client.create2(
      `${base}/n-`,
      Buffer.from('v1'),
      OPEN_ACL_UNSAFE,
      CreateMode.PERSISTENT_SEQUENTIAL,
    );
    expect(path).toMatch(/\/n-0000000000$/);
    expect(stat.czxid).toBeGreaterThan(0n);
    const listed = await client.getChildren2(base);
    expect(listed.children).toEqual([path.slice(base.length + 1)]);
    expect(listed.stat.numChildren).toBe(1);
    expect((await client.setData(path, Buffer.from('v2'), 0)).version).toBe(1);
    await client.sync(path);
    expect((await client.getData(path)).data.toString()).toBe('v2');
    await expect(client.delete(path, 0)).rejects.toMatchObject({ name: 'BAD_VERSION' });
    await expect(client.delete(base)).rejects.toMatchObject({ name: 'NOT_EMPTY' });
    await expect(client.create(path, Buffer.alloc(0), OPEN_ACL_UNSAFE, 0)).rejects.toMatchObject({
      name: 'NODE_EXISTS',
    });
    await client.delete(path, 1);
    expect(await client.exists(path)).toBeNull();
  });

  it('multi: all or nothing, the failing operation’s code', async () => {
    const client = await open();
    const base = `/wire-${crypto.randomUUID()}`;
    await client.mkdirp(base);
    await expect(
      client.multi([
        { op: 'create', path: `${base}/a`, data: Buffer.alloc(0), acl: OPEN_ACL_UNSAFE, mode: 0 },
        { op: 'check', path: `${base}/missing`, version: -1 },
      ]),
    ).rejects.toMatchObject({ name: 'NO_NODE' });
    expect(await client.exists(`${base}/a`)).toBeNull();
    const results = await client.multi([
      { op: 'create', path: `${base}/a`, data: Buffer.alloc(0), acl: OPEN_ACL_UNSAFE, mode: 0 },
      { op: 'setData', path: `${base}/a`, data: Buffer.from('x'), version: 0 },
      { op: 'delete', path: `${base}/a`, version: 1 },
    ]);
    expect(results.map((r) => r.op)).toEqual(['create', 'setData', 'delete']);
  });

  it('chroot: paths in and out are relative to it', async () => {
    const outside = await open();
    const chroot = `/chroot-${crypto.randomUUID()}`;
    await outside.mkdirp(chroot);
    const inside = await open(`${connectString}${chroot}`);
    const created = await inside.create('/x', Buffer.alloc(0), OPEN_ACL_UNSAFE, 0);
    expect(created).toBe('/x');
    expect(await outside.getChildren(chroot)).toEqual(['x']);
    let told!: (event: unknown) => void;
    const seen = new Promise((resolve) => {
      told = resolve;
    });
    await inside.exists('/x', { watch: told });
    await outside.delete(`${chroot}/x`);
    expect(await seen).toEqual({ type: 'deleted', path: '/x' });
  });

  it('many listeners on one path share one registration; one that gives up leaves', async () => {
    const client = await open();
    const other = await open();
    const path = `/wire-${crypto.randomUUID()}`;
    await other.create(path, Buffer.alloc(0), OPEN_ACL_UNSAFE, 0);
    let fired = 0;
    const listeners = Array.from({ length: 50 }, () => () => {
      fired += 1;
    });
    for (const listener of listeners) await client.exists(path, { watch: listener });
    expect(client.watchCount).toBe(1);
    client.unwatch(path, listeners[0] as () => void);
    expect(client.watchCount).toBe(1);
    await other.setData(path, Buffer.from('changed'));
    await eventually('49 listeners told', async () => fired === 49);
    expect(client.watchCount).toBe(0);
  });

  it('watches survive a lost connection (SetWatches): a change while disconnected is still told', async () => {
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    try {
      const client = await open(proxy.address);
      const other = await open();
      const path = `/wire-${crypto.randomUUID()}`;
      await other.create(path, Buffer.alloc(0), OPEN_ACL_UNSAFE, 0);
      let told!: (event: unknown) => void;
      const seen = new Promise((resolve) => {
        told = resolve;
      });
      expect(await client.exists(path, { watch: told })).not.toBeNull(); // registered
      const sessionId = client.sessionId;
      proxy.setMode({ kind: 'blackhole' });
      proxy.cutAll();
      await other.delete(path); // while our client has no connection
      proxy.setMode({ kind: 'pass' });
      expect(await seen).toEqual({ type: 'deleted', path });
      expect(client.sessionId).toBe(sessionId); // the same session, resumed
    } finally {
      await proxy.close();
    }
  });

  it('close() ends the session on the server: its ephemeral node goes at once', async () => {
    const client = await open();
    const other = await open();
    const path = `/wire-${crypto.randomUUID()}`;
    await client.create(path, Buffer.alloc(0), OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
    await client.close();
    expect(client.state).toBe('closed');
    expect(await other.exists(path)).toBeNull();
    await expect(client.getChildren('/')).rejects.toMatchObject({ name: 'CONNECTION_LOSS' });
  });
});
