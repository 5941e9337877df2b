import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import type { Lock, ReadWriteLock } from '../../src/index.js';
import { eventually } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';
import { type Curator, curatorMissing, startCurator } from './curator.js';

const missing = curatorMissing();
/** A bound on every wait for a state, not a duration anything is expected to take. */
const WAIT_MS = 20_000;
/** Curator's protected node names for the reads and writes of an InterProcessReadWriteLock. */
const NODE = /^_c_[0-9a-f-]{36}-__(READ|WRIT)__\d{10}$/;

/**
 * fencekit's read-write locks and Apache Curator's InterProcessReadWriteLock (Debian's
 * libcurator-recipes-java, driven by CuratorHarness.java) on the same ZooKeeper path: one queue,
 * shared readers, exclusive writers both ways, and request order kept across the two.
 */
describe.skipIf(missing !== undefined)('ZooKeeper read-write locks interop with Curator', () => {
  let zk: ServerGroup;
  let curator: Curator;
  let raw: ZkClient;
  let fencekit: ZooKeeperLockProvider;
  beforeAll(async () => {
    zk = await startServers('zookeeper');
    curator = await startCurator(endpoint(zk, 'ZK_CONNECT'));
    raw = await ZkClient.connect(
      { connectString: endpoint(zk, 'ZK_CONNECT'), sessionTimeoutMs: 10_000, callTimeoutMs: 5_000 },
      { timeoutMs: 10_000 },
    );
    // root '' puts names at the ZooKeeper root: the name is Curator's path without its leading '/'.
    fencekit = new ZooKeeperLockProvider({
      connectString: endpoint(zk, 'ZK_CONNECT'),
      root: '',
      sessionTimeoutMs: 4_000,
      serverTickMs: 200,
      callTimeoutMs: 2_000,
    });
  }, 120_000);
  afterAll(async () => {
    await fencekit?.close();
    await raw?.close();
    await curator?.close();
    await zk?.stop();
  });

  /** A fresh path, and Curator handles on it: `<prefix>-r<i>` reads and `<prefix>-w<i>` writes. */
  const shared = async (label: string): Promise<{ rw: ReadWriteLock; nodes: () => Promise<string[]> }> => {
    const name = `interop/rw-${label}-${crypto.randomUUID()}`;
    for (const handle of ['r1', 'r2', 'w1']) {
      const mode = handle.startsWith('r') ? 'read' : 'write';
      expect(await curator.call(`rwlock ${label}-${handle} /${name} ${mode}`)).toBe('ok');
    }
    const nodes = () => raw.getChildren(`/${name}`).catch(() => [] as string[]);
    return { rw: fencekit.readWriteLock(name), nodes };
  };
  const nodesReach = (nodes: () => Promise<string[]>, count: number) =>
    eventually(`${count} nodes queued`, async () => (await nodes()).length === count, WAIT_MS);
  const answer = (lock: Lock | null) => (lock === null ? 'refused' : 'granted');

  it('Curator holds the write: fencekit readers and writers wait, and are let in when it goes', async () => {
    const { rw, nodes } = await shared('cw');
    const steps: string[] = [];
    steps.push(`curator write: ${await curator.call('acquire cw-w1 5000')}`);
    steps.push(`fencekit try read: ${answer(await rw.tryAcquireRead())}`);
    steps.push(`fencekit try write: ${answer(await rw.tryAcquireWrite())}`);
    steps.push(`fencekit sees the writer: ${(await rw.inspect()).writer !== null}`);
    const reading = rw.acquireRead({ waitMs: WAIT_MS });
    await nodesReach(nodes, 2);
    steps.push(`layout: ${(await nodes()).every((node) => NODE.test(node))}`);
    steps.push(`curator release: ${await curator.call('release cw-w1')}`);
    const read = await reading;
    steps.push(`fencekit read after: ${read.held ? 'granted' : 'lost'}`);
    const writing = rw.acquireWrite({ waitMs: WAIT_MS });
    await nodesReach(nodes, 2);
    await read.release();
    const write = await writing;
    steps.push(`fencekit write after: ${write.held ? 'granted' : 'lost'}`);
    await write.release();
    expect(steps).toEqual([
      'curator write: granted',
      'fencekit try read: refused',
      'fencekit try write: refused',
      'fencekit sees the writer: true',
      'layout: true',
      'curator release: released',
      'fencekit read after: granted',
      'fencekit write after: granted',
    ]);
  });

  it('fencekit holds the write: Curator readers and writers time out, and get in once it goes', async () => {
    const { rw } = await shared('fw');
    const steps: string[] = [];
    const write = await rw.acquireWrite();
    steps.push(`curator read while fencekit writes: ${await curator.call('acquire fw-r1 300')}`);
    steps.push(`curator write while fencekit writes: ${await curator.call('acquire fw-w1 300')}`);
    const reading = curator.call(`acquire fw-r1 ${WAIT_MS}`);
    await write.release();
    steps.push(`curator read after: ${await reading}`);
    steps.push(`curator release: ${await curator.call('release fw-r1')}`);
    steps.push(`curator write after: ${await curator.call('acquire fw-w1 5000')}`);
    steps.push(`curator release: ${await curator.call('release fw-w1')}`);
    expect(steps).toEqual([
      'curator read while fencekit writes: timeout',
      'curator write while fencekit writes: timeout',
      'curator read after: granted',
      'curator release: released',
      'curator write after: granted',
      'curator release: released',
    ]);
  });

  it('readers share across the two; neither side’s writer gets in while they read', async () => {
    const { rw } = await shared('share');
    const steps: string[] = [];
    steps.push(`curator read: ${await curator.call('acquire share-r1 5000')}`);
    const read = await rw.tryAcquireRead({ owner: 'fencekit-reader' });
    steps.push(`fencekit read beside it: ${answer(read)}`);
    const info = await rw.inspect();
    steps.push(`readers seen by fencekit: ${info.readers.length}, writer: ${info.writer}`);
    steps.push(`curator second read: ${await curator.call('acquire share-r2 5000')}`);
    steps.push(`curator write: ${await curator.call('acquire share-w1 300')}`);
    steps.push(`fencekit write: ${answer(await rw.tryAcquireWrite())}`);
    await read?.release();
    for (const handle of ['r1', 'r2'])
      steps.push(`release ${handle}: ${await curator.call(`release share-${handle}`)}`);
    steps.push(`curator write once all left: ${await curator.call('acquire share-w1 5000')}`);
    steps.push(`release w1: ${await curator.call('release share-w1')}`);
    expect(steps).toEqual([
      'curator read: granted',
      'fencekit read beside it: granted',
      'readers seen by fencekit: 2, writer: null',
      'curator second read: granted',
      'curator write: timeout',
      'fencekit write: refused',
      'release r1: released',
      'release r2: released',
      'curator write once all left: granted',
      'release w1: released',
    ]);
  });

  it('a waiting Curator writer blocks a later fencekit reader (FIFO)', async () => {
    const { rw, nodes } = await shared('cfifo');
    const steps: string[] = [];
    const early = await rw.acquireRead();
    const curatorWriting = curator.call(`acquire cfifo-w1 ${WAIT_MS}`);
    await nodesReach(nodes, 2);
    steps.push(`fencekit try read behind the writer: ${answer(await rw.tryAcquireRead())}`);
    let lateGranted = false;
    const late = rw.acquireRead({ waitMs: WAIT_MS }).then((lock) => {
      lateGranted = true;
      return lock;
    });
    await nodesReach(nodes, 3);
    await early.release();
    steps.push(`curator writer after the early reader: ${await curatorWriting}`);
    const info = await rw.inspect();
    // The late reader is still queued behind the Curator writer, which holds.
    steps.push(`while curator writes: writer ${info.writer !== null}, waiters ${info.waiters}`);
    steps.push(`late reader granted meanwhile: ${lateGranted}`);
    const writerToken = info.writer?.fencingToken ?? 0n;
    steps.push(`curator release: ${await curator.call('release cfifo-w1')}`);
    const read = await late;
    steps.push(`late reader after the writer: ${read.fencingToken > writerToken}`);
    await read.release();
    expect(steps).toEqual([
      'fencekit try read behind the writer: refused',
      'curator writer after the early reader: granted',
      'while curator writes: writer true, waiters 1',
      'late reader granted meanwhile: false',
      'curator release: released',
      'late reader after the writer: true',
    ]);
  });

  it('a waiting fencekit writer blocks a later Curator reader (FIFO)', async () => {
    const { rw, nodes } = await shared('ffifo');
    const steps: string[] = [];
    steps.push(`curator early read: ${await curator.call('acquire ffifo-r1 5000')}`);
    const writing = rw.acquireWrite({ waitMs: WAIT_MS });
    await nodesReach(nodes, 2);
    steps.push(`curator read behind the writer: ${await curator.call('acquire ffifo-r2 300')}`);
    const curatorReading = curator.call(`acquire ffifo-r2 ${WAIT_MS}`);
    await nodesReach(nodes, 3);
    steps.push(`curator early release: ${await curator.call('release ffifo-r1')}`);
    const write = await writing;
    const info = await rw.inspect();
    steps.push(
      `while fencekit writes: ${info.writer?.fencingToken === write.fencingToken}, waiters ${info.waiters}`,
    );
    await write.release();
    steps.push(`curator late read after the writer: ${await curatorReading}`);
    steps.push(`curator release: ${await curator.call('release ffifo-r2')}`);
    expect(steps).toEqual([
      'curator early read: granted',
      'curator read behind the writer: timeout',
      'curator early release: released',
      'while fencekit writes: true, waiters 1',
      'curator late read after the writer: granted',
      'curator release: released',
    ]);
  });
});
