import net from 'node:net';
import { inspect } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FolderMaker } from '../../adapters/zookeeper/folders.js';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient, type ZkClientOptions } from '../../adapters/zookeeper/wire/client.js';
import { codeName } from '../../adapters/zookeeper/wire/codes.js';
import { FrameDecoder } from '../../adapters/zookeeper/wire/frames.js';
import { JuteReader, JuteWriter } from '../../adapters/zookeeper/wire/jute.js';
import { CreateMode, OPEN_ACL_UNSAFE, Op, Xid } from '../../adapters/zookeeper/wire/ops.js';
import { ReconnectPacing } from '../../adapters/zookeeper/wire/reconnect-pacing.js';
import { BackendUnavailableError, InvalidArgumentError } from '../../src/index.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

/**
 * The ZooKeeper client's connection discipline against a fake server that misbehaves on purpose
 * (a real server cannot be made to): a stream out of step, a server that drops every connection,
 * long watch paths on reconnect, every error code, a refused credential, frames past the limit.
 */

/** One request as the fake server decoded it. */
interface Request {
  xid: number;
  op: number;
  body: JuteReader;
  size: number;
}

interface FakeZk {
  port: number;
  /** Connections accepted so far. */
  connections: number;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A fake ZooKeeper on a loopback port. Each connection's first frame (the connect request) is
 * answered with a session of `grantedMs`, unless onConnect returns false; later frames go to
 * onRequest with the connection's number (0 for the first).
 */
async function fakeZk(handlers: {
  grantedMs?: number;
  onConnect?(socket: net.Socket, connection: number): boolean | undefined;
  onRequest?(socket: net.Socket, request: Request, connection: number): void;
}): Promise<FakeZk> {
  const sockets = new Set<net.Socket>();
  const fake = {
    port: 0,
    connections: 0,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((ok) => server.close(ok));
    },
  };
  const server = net.createServer((socket) => {
    const connection = fake.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined); // the client hangs up as it likes
    const decoder = new FrameDecoder(64 * 1024 * 1024);
    let greeted = false;
    socket.on('data', (chunk: Buffer) => {
      for (const frame of decoder.push(chunk)) {
        if (!greeted) {
          greeted = true;
          if (handlers.onConnect?.(socket, connection) === false) continue;
          socket.write(connectResponse(handlers.grantedMs ?? 4_000));
          continue;
        }
        const body = new JuteReader(frame);
        const xid = body.int();
        const op = body.int();
        handlers.onRequest?.(socket, { xid, op, body, size: frame.length + 4 }, connection);
      }
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  fake.port = (server.address() as net.AddressInfo).port;
  return fake;
}

const connectResponse = (grantedMs: number) =>
  new JuteWriter().int(0).int(grantedMs).long(0x1234n).buffer(Buffer.alloc(16, 7)).bool(false).frame();

/** A reply frame: header (xid, zxid, err) and an optional body. */
function reply(socket: net.Socket, xid: number, err: number, body?: (w: JuteWriter) => void): void {
  const w = new JuteWriter().int(xid).long(7n).int(err);
  body?.(w);
  socket.write(w.frame());
}

const fakes: FakeZk[] = [];
const clients: ZkClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close(200)));
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

async function open(fake: FakeZk, options: Partial<ZkClientOptions> = {}): Promise<ZkClient> {
  const client = await ZkClient.connect(
    { connectString: `127.0.0.1:${fake.port}`, sessionTimeoutMs: 4_000, callTimeoutMs: 2_000, ...options },
    { timeoutMs: 5_000 },
  );
  clients.push(client);
  return client;
}

async function started(handlers: Parameters<typeof fakeZk>[0]): Promise<FakeZk> {
  const fake = await fakeZk(handlers);
  fakes.push(fake);
  return fake;
}

describe('the read deadline counts whole frames only', () => {
  it('a server that keeps sending bytes that never make a frame is given up', async () => {
    const dribbles: NodeJS.Timeout[] = [];
    const fake = await started({
      grantedMs: 1_500, // read deadline 1 s
      onConnect: (socket, connection) => {
        if (connection > 0) return true; // later connections behave
        socket.write(connectResponse(1_500));
        // Then a length prefix that promises 1,000 bytes, and one byte every 50 ms, never all of them.
        socket.write(Buffer.from([0, 0, 0x03, 0xe8]));
        const dribble = setInterval(() => socket.write(Buffer.from([0x2a])), 50);
        dribbles.push(dribble);
        socket.on('close', () => clearInterval(dribble));
        return false;
      },
    });
    try {
      const client = await open(fake, { sessionTimeoutMs: 1_500 });
      const states: string[] = [];
      client.onState((state) => states.push(state));
      // 1 s of silence ends the connection; 10 s is far beyond that even on a slow machine, and
      // the dribble (20 bytes a second) would keep the old client connected through all of it.
      for (let waited = 0; !states.includes('disconnected') && waited < 10_000; waited += 100)
        await sleep(100);
      expect(states).toContain('disconnected');
    } finally {
      for (const dribble of dribbles) clearInterval(dribble);
    }
  }, 20_000);
});

describe('reconnect pacing', () => {
  it('a server that drops every connection right after the handshake is not hammered', async () => {
    const fake = await started({
      onConnect: (socket) => {
        socket.end(connectResponse(4_000));
        return false;
      },
    });
    await open(fake);
    const before = fake.connections;
    await sleep(2_000);
    const reconnects = fake.connections - before;
    console.log(`reconnect pacing: ${reconnects} reconnects in 2 s to a server that drops each connection`);
    // A random 0..1 s wait before each: about 4 in 2 s (a slower machine: fewer). Unpaced: hundreds.
    expect(reconnects).toBeGreaterThanOrEqual(1);
    expect(reconnects).toBeLessThan(20);
  }, 10_000);

  it('close() during the wait ends it: no connection attempt after close', async () => {
    const fake = await started({
      onConnect: (socket) => {
        socket.end(connectResponse(4_000));
        return false;
      },
    });
    const client = await open(fake);
    await eventually('disconnected, waiting to reconnect', async () => client.state === 'disconnected');
    await client.close(200);
    await sleep(100); // an attempt already under way when close() came has reached the server by now
    const after = fake.connections;
    await sleep(1_500); // longer than any wait
    expect(fake.connections).toBe(after);
    expect(client.state).toBe('closed');
  }, 10_000);

  it('the wait after a connection: 0..1 s, and at most half of what is left of the session', () => {
    const almostOne = new ReconnectPacing(() => 0.999_999);
    expect(almostOne.afterConnection(10_000)).toBeGreaterThan(999);
    expect(almostOne.afterConnection(10_000)).toBeLessThanOrEqual(1_000);
    // Dropped by the read deadline (2/3 of a 4 s session): 1,333 ms left, so 667 ms at most.
    expect(almostOne.afterConnection(4_000 / 3)).toBeLessThanOrEqual(4_000 / 6);
    expect(almostOne.afterConnection(-50)).toBe(0); // nothing left: reconnect at once
    expect(new ReconnectPacing(() => 0).afterConnection(10_000)).toBe(0);
  });

  it('the wait after failed rounds: jittered backoff from 50 ms doubling to 1 s, within the session left, never a hot loop', () => {
    const longest = new ReconnectPacing(() => 0.999_999);
    const shortest = new ReconnectPacing(() => 0);
    const rounds = (pacing: ReconnectPacing) =>
      Array.from({ length: 8 }, () => Math.round(pacing.afterFailedRound(Number.POSITIVE_INFINITY)));
    expect(rounds(longest)).toEqual([50, 100, 200, 400, 800, 1_000, 1_000, 1_000]);
    expect(rounds(shortest)).toEqual([25, 50, 100, 200, 400, 500, 500, 500]);
    longest.established();
    expect(Math.round(longest.afterFailedRound(Number.POSITIVE_INFINITY))).toBe(50);
    for (let i = 0; i < 5; i++) longest.afterFailedRound(Number.POSITIVE_INFINITY);
    expect(longest.afterFailedRound(600)).toBeLessThanOrEqual(300);
    expect(longest.afterFailedRound(30)).toBe(20); // a floor while the session's last moments pass
    // Once the session can have expired nothing is saved by hurrying: a long outage gets the plain backoff.
    expect(Math.round(longest.afterFailedRound(-1_000))).toBe(1_000);
  });
});

describe('SetWatches on reconnect', () => {
  it('long watch paths are handed over in requests of at most 128 kB, every path once', async () => {
    const sizes: number[] = [];
    const handedOver = new Set<string>();
    const fake = await started({
      onRequest: (socket, request, connection) => {
        if (request.op === Op.exists) {
          reply(socket, request.xid, -101); // NO_NODE: the watch waits for its creation
          if (connection === 0 && request.xid === 1_200) socket.destroy(); // all registered: cut
          return;
        }
        if (request.op !== Op.setWatches) return;
        sizes.push(request.size);
        request.body.long(); // relative zxid
        for (let kind = 0; kind < 3; kind++) {
          for (const path of request.body.vector((r) => r.string() ?? '') ?? []) handedOver.add(path);
        }
        reply(socket, Xid.setWatches, 0);
      },
    });
    const client = await open(fake, { callTimeoutMs: 10_000 });
    // 1,200 paths of about 1,000 bytes: 1.2 MB of watches, past the server's 1 MiB jute.maxbuffer.
    const paths = Array.from({ length: 1_200 }, (_, i) => `/${'w'.repeat(990)}/${i}`);
    await Promise.all(paths.map((path) => client.exists(path, { watch: () => undefined })));
    expect(client.watchCount).toBe(1_200);
    await eventually('every watch handed over', async () => handedOver.size === 1_200, 10_000);
    expect([...handedOver].sort()).toEqual([...paths].sort());
    console.log(`SetWatches: ${sizes.length} requests, largest ${Math.max(...sizes)} bytes`);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(128 * 1024);
    expect(sizes.length).toBeGreaterThanOrEqual(10);
  }, 30_000);
});

describe('error codes', () => {
  /** KeeperException.Code of the Java server, under the adapter's names. */
  const CODES: Record<number, string> = {
    [-1]: 'SYSTEM_ERROR',
    [-2]: 'RUNTIME_INCONSISTENCY',
    [-3]: 'DATA_INCONSISTENCY',
    [-4]: 'CONNECTION_LOSS',
    [-5]: 'MARSHALLING_ERROR',
    [-6]: 'UNIMPLEMENTED',
    [-7]: 'OPERATION_TIMEOUT',
    [-8]: 'BAD_ARGUMENTS',
    [-12]: 'UNKNOWN_SESSION',
    [-13]: 'NEW_CONFIG_NO_QUORUM',
    [-14]: 'RECONFIG_IN_PROGRESS',
    [-15]: 'UNKNOWN_-15', // the C client's SSL error: never sent by a server
    [-100]: 'API_ERROR',
    [-101]: 'NO_NODE',
    [-102]: 'NO_AUTH',
    [-103]: 'BAD_VERSION',
    [-108]: 'NO_CHILDREN_FOR_EPHEMERALS',
    [-110]: 'NODE_EXISTS',
    [-111]: 'NOT_EMPTY',
    [-112]: 'SESSION_EXPIRED',
    [-113]: 'INVALID_CALLBACK',
    [-114]: 'INVALID_ACL',
    [-115]: 'AUTH_FAILED',
    [-118]: 'SESSION_MOVED',
    [-119]: 'NOT_READ_ONLY',
    [-120]: 'EPHEMERAL_ON_LOCAL_SESSION',
    [-121]: 'NO_WATCHER',
    [-122]: 'REQUEST_TIMEOUT',
    [-123]: 'RECONFIG_DISABLED',
    [-124]: 'SESSION_CLOSED_REQUIRE_SASL_AUTH',
    [-125]: 'QUOTA_EXCEEDED',
    [-127]: 'THROTTLED_OP',
  };

  it('a call the server answers with a code rejects with the code’s name, for every code', async () => {
    const fake = await started({
      onRequest: (socket, request) => {
        if (request.op !== Op.getData) return;
        const code = Number((request.body.string() ?? '').split('/').pop());
        reply(socket, request.xid, code);
      },
    });
    const client = await open(fake);
    const named: Record<number, string> = {};
    for (const code of Object.keys(CODES).map(Number)) {
      named[code] = await client.getData(`/code/${code}`).then(
        () => 'answered',
        (error: Error) => error.name,
      );
    }
    expect(named).toEqual(CODES);
    for (const [code, name] of Object.entries(CODES)) expect(codeName(Number(code))).toBe(name);
  });

  it('after AUTH_FAILED every later call fails with AUTH_FAILED, not CONNECTION_LOSS', async () => {
    const fake = await started({
      onRequest: (socket, request) => {
        if (request.op !== Op.auth) return;
        reply(socket, Xid.auth, -115);
        socket.end();
      },
    });
    const client = await open(fake, { auth: [{ scheme: 'digest', auth: Buffer.from('u:never-shown') }] });
    await eventually('the session ended', async () => client.state === 'closed');
    await expect(client.getChildren('/')).rejects.toMatchObject({ name: 'AUTH_FAILED' });
    await expect(client.exists('/x')).rejects.toMatchObject({ name: 'AUTH_FAILED' });
  });
});

describe('credentials added at run time', () => {
  /** Records auth packets and requests per connection; getData('/cut') drops the connection. */
  async function recordingFake(refuse?: string) {
    const seen: { connection: number; what: string }[] = [];
    const fake = await started({
      onRequest: (socket, request, connection) => {
        if (request.op === Op.auth) {
          request.body.int(); // type
          const what = `${request.body.string()} ${request.body.buffer()?.toString()}`;
          seen.push({ connection, what });
          reply(socket, Xid.auth, what === refuse ? -115 : 0);
          if (what === refuse) socket.end(); // as a real server: the connection goes with the refusal
          return;
        }
        if (request.op !== Op.getData) return;
        const path = request.body.string() ?? '';
        seen.push({ connection, what: `getData ${path}` });
        if (path === '/cut' && connection === 0) socket.destroy();
        else reply(socket, request.xid, -101);
      },
    });
    return { fake, seen };
  }

  it('sent on the live connection, answered, and sent first again on every reconnect', async () => {
    const { fake, seen } = await recordingFake();
    const client = await open(fake, { auth: [{ scheme: 'digest', auth: Buffer.from('old:1') }] });
    await client.addAuth({ scheme: 'digest', auth: Buffer.from('new:2') });
    expect(seen.map((s) => `${s.connection} ${s.what}`)).toEqual(['0 digest old:1', '0 digest new:2']);
    await expect(client.getData('/cut')).rejects.toMatchObject({ name: 'CONNECTION_LOSS' });
    await expect(client.getData('/x')).rejects.toMatchObject({ name: 'NO_NODE' });
    expect(seen.filter((s) => s.connection === 1).map((s) => s.what)).toEqual([
      'digest old:1',
      'digest new:2',
      'getData /x',
    ]);
  });

  it('refused: AUTH_FAILED for it and every later call', async () => {
    const { fake } = await recordingFake('digest new:refused');
    const client = await open(fake);
    await expect(
      client.addAuth({ scheme: 'digest', auth: Buffer.from('new:refused') }),
    ).rejects.toMatchObject({
      name: 'AUTH_FAILED',
    });
    await expect(client.getData('/x')).rejects.toMatchObject({ name: 'AUTH_FAILED' });
  });

  it('provider.addDigest refused: BackendUnavailableError that shows the password nowhere', async () => {
    const secret = 'Rot4ted/Pa?ss#w@rd-never-shown';
    const { fake } = await recordingFake(`digest alice:${secret}`);
    const provider = new ZooKeeperLockProvider({
      connectString: `127.0.0.1:${fake.port}`,
      callTimeoutMs: 2_000,
      serverTickMs: 200,
    });
    try {
      expect(await provider.sessionTimeoutMs()).toBe(4_000); // a session is open
      const error = await provider.addDigest(`alice:${secret}`).then(
        () => 'accepted',
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      const shown = [String(error), (error as Error).stack, inspect(error, { depth: 10, showHidden: true })];
      for (const text of shown) expect(text).not.toContain('never-shown');
      expect(String((error as Error).cause)).toContain('AUTH_FAILED');
    } finally {
      await provider.close();
    }
  });
});

describe('a server without container nodes (older than 3.5.1)', () => {
  /**
   * As such a server: an unknown request (createContainer) is answered UNIMPLEMENTED and its
   * connection closed, later frames on it unread; plain creates make persistent nodes in a tree.
   */
  async function withoutContainers() {
    const tree = new Set(['/']);
    const seen: { connection: number; op: number; path: string; mode?: number }[] = [];
    const closed = new Set<number>();
    const fake = await started({
      onRequest: (socket, request, connection) => {
        if (closed.has(connection)) return;
        if (request.op === Op.createContainer) {
          seen.push({ connection, op: request.op, path: request.body.string() ?? '' });
          reply(socket, request.xid, -6);
          closed.add(connection);
          socket.end();
          return;
        }
        if (request.op !== Op.create) return;
        const path = request.body.string() ?? '';
        request.body.buffer(); // data
        request.body.vector((acl) => [acl.int(), acl.string(), acl.string()]);
        const mode = request.body.int();
        seen.push({ connection, op: request.op, path, mode });
        const parent = path.slice(0, path.lastIndexOf('/')) || '/';
        if (!tree.has(parent)) return reply(socket, request.xid, -101);
        if (tree.has(path)) return reply(socket, request.xid, -110);
        tree.add(path);
        reply(socket, request.xid, 0, (w) => w.string(path));
      },
    });
    return { fake, tree, seen };
  }
  const folder = (path: string) => ({ path, data: Buffer.alloc(0), acl: OPEN_ACL_UNSAFE });

  it('createContainer fails with UNIMPLEMENTED; the session goes on on the next connection', async () => {
    const { fake } = await withoutContainers();
    const client = await open(fake);
    await expect(client.createContainer('/f', Buffer.alloc(0), OPEN_ACL_UNSAFE)).rejects.toMatchObject({
      name: 'UNIMPLEMENTED',
    });
    // A call sent before the close is seen fails with CONNECTION_LOSS (never replayed): wait for the next one.
    await eventually('the session resumed on a new connection', async () => fake.connections === 2);
    await eventually('connected', async () => client.state === 'connected');
    expect(await client.create('/f', Buffer.alloc(0), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)).toBe('/f');
    expect(fake.connections).toBe(2);
  });

  it("the provider's folders: one refusal, then persistent folders for this and every later one", async () => {
    const { fake, tree, seen } = await withoutContainers();
    const client = await open(fake);
    const folders = new FolderMaker();
    const signal = new AbortController().signal;
    await folders.ensure(client, folder('/fencekit/locks/a'), signal);
    expect(folders.containers).toBe(false);
    expect([...tree].sort()).toEqual(['/', '/fencekit', '/fencekit/locks', '/fencekit/locks/a']);
    const refused = seen.filter((s) => s.op === Op.createContainer);
    expect(refused).toEqual([{ connection: 0, op: Op.createContainer, path: '/fencekit/locks/a' }]);
    seen.length = 0;
    await folders.ensure(client, folder('/fencekit/locks/b'), signal);
    expect(seen).toEqual([
      { connection: 1, op: Op.create, path: '/fencekit/locks/b', mode: CreateMode.PERSISTENT },
    ]);
    expect(fake.connections).toBe(2); // the refusal closed one connection, once
  });
});

describe('the incoming frame limit (maxFrameBytes)', () => {
  const bigReply = (bytes: number) =>
    started({
      onRequest: (socket, request) => {
        if (request.op !== Op.getData) return;
        reply(socket, request.xid, 0, (w) => {
          w.buffer(Buffer.alloc(bytes, 1));
          for (let i = 0; i < 11; i++) w.long(0n); // Stat: 6 longs and 5 ints, zeros do
        });
      },
    });

  it('a reply past the limit ends the connection; the default takes it', async () => {
    const fake = await bigReply(100 * 1024);
    const limited = await open(fake, { maxFrameBytes: 64 * 1024 });
    await expect(limited.getData('/big')).rejects.toMatchObject({ name: 'CONNECTION_LOSS' });
    const unlimited = await open(fake);
    expect((await unlimited.getData('/big')).data.length).toBe(100 * 1024);
  });

  it('the default takes a child list of 20,000 lock nodes, past the Java client’s 1 MiB', async () => {
    const names = Array.from(
      { length: 20_000 },
      (_, i) => `_c_${crypto.randomUUID()}-lock-${String(i).padStart(10, '0')}`,
    );
    const fake = await started({
      onRequest: (socket, request) => {
        if (request.op === Op.getChildren)
          reply(socket, request.xid, 0, (w) => w.vector(names, (x, n) => x.string(n)));
      },
    });
    const client = await open(fake);
    expect(await client.getChildren('/busy')).toHaveLength(20_000);
  });

  it('the provider refuses a limit that is not a whole number of bytes from 64 KiB to 1 GiB', () => {
    for (const bad of [0, -1, 1_000, 1.5 * 1024 * 1024 + 0.5, 2 ** 31, Number.NaN, '1048576']) {
      expect(
        () => new ZooKeeperLockProvider({ connectString: '127.0.0.1:1', maxFrameBytes: bad as number }),
      ).toThrow(InvalidArgumentError);
    }
    expect(
      () => new ZooKeeperLockProvider({ connectString: '127.0.0.1:1', maxFrameBytes: 0xfffff }),
    ).not.toThrow();
  });
});

describe('addDigest on a real server', () => {
  let zk: ServerGroup;
  let connectString: string;
  beforeAll(async () => {
    zk = await startServers('zookeeper');
    connectString = endpoint(zk, 'ZK_CONNECT');
  });
  afterAll(async () => {
    await zk?.stop();
  });

  it('a rotated credential joins the live session, and again after a reconnect: nodes created since carry it', async () => {
    const [host = '', port = ''] = connectString.split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    const provider = new ZooKeeperLockProvider({
      connectString: proxy.address,
      digest: 'alice:old',
      creatorOnlyAcl: true,
      sessionTimeoutMs: 4_000,
      serverTickMs: 200,
      callTimeoutMs: 5_000,
    });
    const as = async (digest: string) => {
      const client = await ZkClient.connect(
        {
          connectString,
          sessionTimeoutMs: 4_000,
          callTimeoutMs: 5_000,
          auth: [{ scheme: 'digest', auth: Buffer.from(digest) }],
        },
        { timeoutMs: 5_000 },
      );
      clients.push(client);
      return client;
    };
    try {
      const alice = await as('alice:old');
      const bob = await as('bob:new');
      /** The lock node of key, whether bob (only the new credential) may read it, and its session. */
      const node = async (key: string) => {
        const [name] = await alice.getChildren(provider.folder(key));
        const path = `${provider.folder(key)}/${name}`;
        const { stat } = await alice.getData(path);
        const readable = await bob.getData(path).then(
          () => true,
          (error: Error) => (error.name === 'NO_AUTH' ? false : Promise.reject(error)),
        );
        return { readable, session: stat.ephemeralOwner };
      };
      const before = await provider.acquire(uniqueKey('rotate'));
      expect((await node(before.key)).readable).toBe(false);
      await provider.addDigest('bob:new');
      const added = await provider.acquire(uniqueKey('rotate'));
      const live = await node(added.key);
      expect(live.readable).toBe(true);
      proxy.cutAll(); // the session resumes on a new connection, which must send the credential again
      const resumed = await provider.acquire(uniqueKey('rotate'));
      const again = await node(resumed.key);
      expect(again).toEqual({ readable: true, session: live.session });
      for (const lock of [before, added, resumed]) await lock.release();
    } finally {
      await provider.close();
      await proxy.close();
    }
  }, 30_000);
});
