import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exitCodeFor } from '../../src/cli/exit-codes.js';
import { parseConnectionUrl } from '../../src/connection-url.js';
import { AuthenticationError, FencekitError } from '../../src/errors.js';
import { processSecrets } from '../../src/secret-mask.js';
import { resolveTls } from '../../src/tls.js';

const KEY_TEXT = '-----BEGIN PRIVATE KEY-----\nnot-a-real-key-but-secret-4711\n-----END PRIVATE KEY-----\n';
let dir: string;
const file = (name: string) => join(dir, name);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fencekit-tls-'));
  await writeFile(file('ca.pem'), 'CA-PEM');
  await writeFile(file('cert.pem'), 'CERT-PEM');
  await writeFile(file('key.pem'), KEY_TEXT);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const tlsOf = (url: string, given?: Parameters<typeof resolveTls>[1]) =>
  resolveTls(parseConnectionUrl(url), given);

describe('TLS said one way for every backend', () => {
  it('a URL without TLS parameters is plain TCP', async () => {
    expect(await tlsOf('etcd://127.0.0.1:2379')).toBeUndefined();
    expect(await tlsOf('redis://127.0.0.1')).toBeUndefined();
  });

  it('rediss:// and tls=1 ask for TLS verified against the system authorities', async () => {
    expect(await tlsOf('rediss://127.0.0.1')).toEqual({});
    expect(await tlsOf('rediss+cluster://127.0.0.1:7000,127.0.0.1:7001')).toEqual({});
    expect(await tlsOf('etcd://127.0.0.1?tls=1')).toEqual({});
    expect(parseConnectionUrl('rediss://127.0.0.1').backend).toBe('redis');
  });

  it('ca=, cert=, key= name files whose contents are used; servername= is kept', async () => {
    const url = `zk://127.0.0.1:2281?ca=${file('ca.pem')}&cert=${file('cert.pem')}&key=${file('key.pem')}&servername=zk.test`;
    const tls = await tlsOf(url);
    expect(String(tls?.ca)).toBe('CA-PEM');
    expect(String(tls?.cert)).toBe('CERT-PEM');
    expect(String(tls?.key)).toBe(KEY_TEXT);
    expect(tls?.servername).toBe('zk.test');
  });

  it('the tls option overrides the URL field by field, and false turns TLS off', async () => {
    const tls = await tlsOf(`etcd://h?ca=${file('ca.pem')}`, { servername: 'etcd.test' });
    expect(String(tls?.ca)).toBe('CA-PEM');
    expect(tls?.servername).toBe('etcd.test');
    expect(await tlsOf('rediss://h', false)).toBeUndefined();
    expect(await tlsOf('redis://h', true)).toEqual({});
  });

  it('a private key read from a file is masked wherever fencekit prints', async () => {
    await tlsOf(`etcd://h?cert=${file('cert.pem')}&key=${file('key.pem')}`);
    expect(processSecrets.text(`oops: ${KEY_TEXT}`)).not.toContain('not-a-real-key-but-secret-4711');
  });

  it('bad TLS input is a typed error that quotes no contents', async () => {
    const bad: Array<[string, Parameters<typeof resolveTls>[1]]> = [
      ['etcd://h?tls=yes', undefined],
      ['etcd://h?ca=', undefined],
      [`etcd://h?ca=${file('missing.pem')}`, undefined],
      [`etcd://h?cert=${file('cert.pem')}`, undefined],
      [`etcd://h?tls=0&ca=${file('ca.pem')}`, undefined],
      ['etcd://h?servername=', undefined],
      ['etcd://h', { cert: 'CERT' }],
      ['etcd://h', { ca: 42 as unknown as string }],
      ['etcd://h', { nope: 1 } as never],
    ];
    for (const [url, given] of bad) {
      const error = await tlsOf(url, given).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, url).toBeInstanceOf(FencekitError);
      expect((error as FencekitError).code).toBe('INVALID_ARGUMENT');
      expect((error as Error).message).not.toContain('CERT-PEM');
    }
  });
});

describe('AuthenticationError', () => {
  it('has the code AUTH_FAILED, names backend and host, and makes the CLI exit 77', () => {
    const error = new AuthenticationError('redis', '127.0.0.1:6380', 'the user name or password was refused');
    expect(error.code).toBe('AUTH_FAILED');
    expect(error.message).toBe('redis at 127.0.0.1:6380: the user name or password was refused');
    expect(exitCodeFor(error)).toBe(77);
  });
});
