import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import { ZkClient } from '../../adapters/zookeeper/wire/client.js';
import { connect, createElection } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { CliProcesses } from '../cli/cli-process.js';
import { makeTestCertificates, type TestCertificates } from '../servers/certs.js';
import { FaultProxy } from '../servers/fault-proxy.js';
import type { ServerGroup } from '../servers/types.js';
import { startSecureZooKeeper } from '../servers/zookeeper-secure.js';
import { expectNoSecret, failure } from './refusals.js';

// ZooKeeper serving clients over TLS only (no clientPort) and requiring a client certificate
// (ssl.clientAuth=need), with digest credentials for the nodes' ACL (docs/security.md). Secrets are
// recognisable, so that a test can say none leaked.
const PASSWORD = 'pw-SECRET-4711';

let certs: TestCertificates;
const files = () => `ca=${certs.caFile}&cert=${certs.client.certFile}&key=${certs.client.keyFile}`;
const cli = new CliProcesses();

beforeAll(async () => {
  certs = await makeTestCertificates();
}, 60_000);
afterAll(async () => {
  await cli.stop();
  await certs?.remove();
});

describe('ZooKeeper over mutual TLS with digest credentials', () => {
  let server: ServerGroup | undefined;
  let host = '';
  beforeAll(async () => {
    server = await startSecureZooKeeper(certs);
    host = server.vars.get('ZK_CONNECT') as string;
  }, 120_000);
  afterAll(() => server?.stop());

  it('a lock, a semaphore and an election work with creatorOnlyAcl (files in the URL)', async () => {
    const provider = await connect(`zk://fencekit:${PASSWORD}@${host}?${files()}`, { creatorOnlyAcl: true });
    try {
      const key = uniqueKey('tls-lock');
      const lock = await provider.acquire(key);
      expect(await provider.list('')).toContain(key);
      const waiting = provider.acquire(key, { waitMs: 10_000 });
      await lock.release();
      const next = await waiting;
      expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
      await next.release();

      const permit = await provider.semaphore(uniqueKey('tls-sem'), { limit: 2 }).acquire();
      await permit.release();

      const leadership = await createElection(provider, uniqueKey('tls-election')).campaign('me');
      expect(leadership.signal.aborted).toBe(false);
      await leadership.resign();
    } finally {
      await provider.close();
    }
  });

  it('the tls option gives the same with contents, through connect() and the provider class', async () => {
    const tls = { ca: certs.ca, cert: certs.client.cert, key: certs.client.key };
    const viaConnect = await connect(`zk://fencekit:${PASSWORD}@${host}`, { tls });
    const viaClass = new ZooKeeperLockProvider({ connectString: host, digest: `fencekit:${PASSWORD}`, tls });
    try {
      await (await viaConnect.acquire(uniqueKey('tls-option'))).release();
      await (await viaClass.acquire(uniqueKey('tls-option'))).release();
    } finally {
      await Promise.all([viaConnect.close(), viaClass.close()]);
    }
  });

  it('creatorOnlyAcl names the digest user and the client certificate: another certificate cannot delete the node', async () => {
    const provider = new ZooKeeperLockProvider({
      connectString: host,
      digest: `fencekit:${PASSWORD}`,
      creatorOnlyAcl: true,
      tls: { ca: certs.ca, cert: certs.client.cert, key: certs.client.key },
    });
    // certs.sh's server certificate may act as a client too (CN=localhost): another x509 identity.
    const raw = (cert: Buffer, key: Buffer, digest: string) =>
      ZkClient.connect(
        {
          connectString: host,
          sessionTimeoutMs: 4_000,
          callTimeoutMs: 5_000,
          auth: [{ scheme: 'digest', auth: Buffer.from(digest) }],
          tls: { ca: certs.ca, cert, key },
        },
        { timeoutMs: 10_000 },
      );
    const other = await raw(certs.server.cert, certs.server.key, 'mallory:guess');
    const sameCertificate = await raw(certs.client.cert, certs.client.key, 'mallory:guess');
    try {
      const key = uniqueKey('tls-acl');
      const lock = await provider.acquire(key);
      await expect(other.getChildren(provider.folder(key))).rejects.toMatchObject({ name: 'NO_AUTH' });
      const [node] = await sameCertificate.getChildren(provider.folder(key));
      const path = `${provider.folder(key)}/${node}`;
      await expect(other.delete(path)).rejects.toMatchObject({ name: 'NO_AUTH' });
      expect(lock.held).toBe(true);
      // The session's certificate identity (x509:CN=fencekit) is on the node too: whoever holds the
      // same certificate may delete it, whatever its digest (docs/security.md says so).
      await sameCertificate.delete(path);
      await expect.poll(() => lock.held).toBe(false);
    } finally {
      await Promise.all([other.close(), sameCertificate.close(), provider.close()]);
    }
  });

  it('a reconnect to another address keeps TLS and the session', async () => {
    const [address = '', port = ''] = host.split(':');
    const proxies = await Promise.all(
      [0, 1].map(() => FaultProxy.start({ host: address, port: Number(port) })),
    );
    const provider = await connect(`zk://${proxies.map((p) => p.address).join(',')}?${files()}`);
    try {
      const lock = await provider.acquire(uniqueKey('tls-reconnect'));
      // Each address in turn refuses (and resets) its connections: the session moves at least once.
      for (const [down, up] of [proxies, [...proxies].reverse()] as const) {
        up?.setMode({ kind: 'pass' });
        down?.setMode({ kind: 'refuse' });
        await (await provider.acquire(uniqueKey('tls-reconnect'), { waitMs: 20_000 })).release();
        expect(lock.held).toBe(true);
      }
      await lock.release();
    } finally {
      await provider.close();
      await Promise.all(proxies.map((p) => p.close()));
    }
  });

  const refused: Array<[string, () => string, RegExp]> = [
    [
      'a server certificate from an authority not trusted',
      () =>
        `zk://fencekit:${PASSWORD}@${host}?ca=${certs.untrustedCaFile}&cert=${certs.client.certFile}&key=${certs.client.keyFile}`,
      /server's certificate was not accepted/,
    ],
    [
      'a server certificate made out for another host than servername',
      () => `zk://fencekit:${PASSWORD}@${host}?${files()}&servername=other.invalid`,
      /certificate was not accepted \(ERR_TLS_CERT_ALTNAME_INVALID\)/,
    ],
    [
      'no client certificate',
      () => `zk://fencekit:${PASSWORD}@${host}?ca=${certs.caFile}`,
      /refused the client certificate/,
    ],
    [
      'a client certificate from an authority the server does not trust',
      () =>
        `zk://fencekit:${PASSWORD}@${host}?ca=${certs.caFile}&cert=${certs.untrustedClient.certFile}&key=${certs.untrustedClient.keyFile}`,
      /refused the client certificate/,
    ],
  ];

  it.each(refused)('%s is AUTH_FAILED, at once, and shows no secret', async (_what, url, why) => {
    const provider = await connect(url());
    try {
      // A waiting acquire does not retry a refusal for its waitMs (60 s here).
      const { error, ms } = await failure(() => provider.acquire(uniqueKey('refused'), { waitMs: 60_000 }));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(error.message).toMatch(new RegExp(`^zookeeper at 127\\.0\\.0\\.1:\\d+: .*${why.source}`));
      expect(ms).toBeLessThan(30_000);
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
      // A read-write lock meets the same refusal, also at once.
      const rw = provider.readWriteLock?.(uniqueKey('refused-rw'));
      const read = await failure(async () => rw?.acquireRead({ waitMs: 60_000 }));
      expect(read.error.code, read.error.message).toBe('AUTH_FAILED');
      expect(read.ms).toBeLessThan(30_000);
    } finally {
      await provider.close();
    }
  });

  it('a plain connection to the TLS port is BACKEND_UNAVAILABLE within callTimeoutMs, not a hang', async () => {
    const provider = await connect(`zk://fencekit:${PASSWORD}@${host}`, { callTimeoutMs: 1_000 });
    try {
      const { error, ms } = await failure(() => provider.acquire(uniqueKey('plain'), { waitMs: 60_000 }));
      expect(error.code, error.message).toBe('BACKEND_UNAVAILABLE');
      expect(ms).toBeLessThan(30_000);
      expectNoSecret(error, { password: PASSWORD, key: certs.client.key });
    } finally {
      await provider.close();
    }
  });

  it('the CLI with a TLS URL or its TLS flags runs its command, and exits 77 on an untrusted authority', async () => {
    const lock = (url: string) =>
      cli.run(['lock', uniqueKey('tls-cli'), '--url', url, '--wait', '10000', '--', 'true'], {
        env: { FENCEKIT_URL: '' },
      });
    const granted = await lock(`zk://fencekit:${PASSWORD}@${host}?${files()}`);
    expect(granted.code, granted.stderr).toBe(0);
    // The same with the CLI's flags: the files and the user, the password from the environment.
    const flags = await cli.run(
      [
        'lock',
        uniqueKey('tls-cli'),
        '--url',
        `zk://${host}`,
        '--ca',
        certs.caFile,
        '--cert',
        certs.client.certFile,
        '--key',
        certs.client.keyFile,
        '--user',
        'fencekit',
        '--wait',
        '10000',
        '--',
        'true',
      ],
      { env: { FENCEKIT_URL: '', FENCEKIT_PASSWORD: PASSWORD } },
    );
    expect(flags.code, flags.stderr).toBe(0);
    const untrusted = await lock(
      `zk://fencekit:${PASSWORD}@${host}?ca=${certs.untrustedCaFile}&cert=${certs.client.certFile}&key=${certs.client.keyFile}`,
    );
    expect(untrusted.code, untrusted.stderr).toBe(77);
    expect(untrusted.stderr).toMatch(/AUTH_FAILED/);
    for (const out of [granted, flags, untrusted]) {
      expectNoSecret(`${out.stdout}\n${out.stderr}`, { password: PASSWORD, key: certs.client.key });
    }
  });
});

describe('ZooKeeper with a certificate made out for another host, TLS 1.3 only', () => {
  let server: ServerGroup | undefined;
  let host = '';
  beforeAll(async () => {
    server = await startSecureZooKeeper(certs, { certificate: 'other-host', protocol: 'TLSv1.3' });
    host = server.vars.get('ZK_CONNECT') as string;
  }, 120_000);
  afterAll(() => server?.stop());

  it('is AUTH_FAILED for the address it was reached at; servername= naming its host connects', async () => {
    const mismatch = await connect(`zk://${host}?${files()}`);
    const named = await connect(`zk://${host}?${files()}&servername=other.invalid`);
    try {
      const { error } = await failure(() => mismatch.acquire(uniqueKey('other-host'), { waitMs: 60_000 }));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(error.message).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
      await (await named.acquire(uniqueKey('other-host'))).release();
    } finally {
      await Promise.all([mismatch.close(), named.close()]);
    }
  });

  it('under TLS 1.3 the refused client certificate is still AUTH_FAILED (its alert follows the handshake)', async () => {
    const provider = await connect(`zk://${host}?ca=${certs.caFile}&servername=other.invalid`, {
      tls: { cert: certs.untrustedClient.cert, key: certs.untrustedClient.key },
    });
    try {
      const { error, ms } = await failure(() => provider.acquire(uniqueKey('tls13'), { waitMs: 60_000 }));
      expect(error.code, error.message).toBe('AUTH_FAILED');
      expect(error.message).toMatch(/refused the client certificate/);
      expect(ms).toBeLessThan(30_000);
      expectNoSecret(error, { password: PASSWORD, key: certs.untrustedClient.key });
    } finally {
      await provider.close();
    }
  });
});
