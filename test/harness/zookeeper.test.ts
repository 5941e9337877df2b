import net from 'node:net';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';
import { awaitEnsembleServing } from '../servers/zk-quorum.js';

/** Sends a ZooKeeper four-letter word and returns the answer. */
function fourLetter(address: string, word: string): Promise<string> {
  const [host = '127.0.0.1', port = '2181'] = address.split(':');
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), host, () => socket.end(word));
    let answer = '';
    socket.setTimeout(2_000, () => socket.destroy(new Error(`${word} to ${address} timed out`)));
    socket.on('data', (chunk) => {
      answer += chunk;
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

const mode = async (address: string) =>
  /Mode: (\w+)/.exec(await fourLetter(address, 'srvr').catch(() => ''))?.[1];

/** Connects, runs body, closes; fails instead of hanging when no server answers. */
async function withClient<T>(connect: string, body: (c: zookeeper.Client) => Promise<T>): Promise<T> {
  const client = zookeeper.createClient(connect, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 });
  const connected = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ZooKeeper session from ${connect}`)), 15_000);
    client.once('connected', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  client.connect();
  try {
    await connected;
    return await body(client);
  } finally {
    client.close();
  }
}

const createAndGet = (client: zookeeper.Client, path: string, data: string) =>
  new Promise<string>((resolve, reject) => {
    client.create(path, Buffer.from(data), (error) => {
      if (error) return reject(error);
      client.getData(path, (err, value) => (err ? reject(err) : resolve(value.toString())));
    });
  });

describe('ZooKeeper standalone (real server)', () => {
  let zk: ServerGroup;
  beforeAll(async () => {
    zk = await startServers('zookeeper');
  });
  afterAll(() => zk?.stop());

  it('creates and reads a node', async () => {
    const value = await withClient(endpoint(zk, 'ZK_CONNECT'), (c) =>
      createAndGet(c, '/fencekit-smoke', 'hello'),
    );
    expect(value).toBe('hello');
  });
});

describe('ZooKeeper 3-node ensemble (real servers)', () => {
  let ensemble: ServerGroup;
  beforeAll(async () => {
    ensemble = await startServers('zookeeper', { size: 3, faults: true });
  }, 180_000); // the script, then the ensemble serving (each within 60 s; zk-quorum.ts)
  afterAll(() => ensemble?.stop());

  it('has one leader; after the leader is killed a new one serves', async () => {
    const addresses = ensemble.members.map((m) => m.address);
    const modes = await Promise.all(addresses.map(mode));
    expect(modes.filter((m) => m === 'leader')).toHaveLength(1);
    expect(modes.filter((m) => m === 'follower')).toHaveLength(2);

    const leaderIndex = modes.indexOf('leader');
    await ensemble.members[leaderIndex]?.kill();
    const survivors = addresses.filter((_, i) => i !== leaderIndex);
    // The survivors elect a new leader: wait for that event (bounded generously), not a fixed time.
    const roles = await awaitEnsembleServing(survivors);
    expect(roles.followers).toHaveLength(1);
    const value = await withClient(survivors.join(','), (c) =>
      createAndGet(c, '/after-leader-kill', 'served'),
    );
    expect(value).toBe('served');
  }, 120_000);
});
