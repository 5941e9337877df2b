import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectionFrom } from '../../src/cli/connection.js';
import { makeTestCertificates, type TestCertificates } from '../servers/certs.js';
import { FENCEKIT_PREFIX, startSecureEtcd } from '../servers/etcd-secure.js';
import { startSecurePostgres } from '../servers/postgres-secure.js';
import { startSecureRedis } from '../servers/redis-secure.js';
import type { ServerGroup } from '../servers/types.js';
import { leaked } from '../unit/secret-urls.js';
import { CliProcesses, until } from './cli-process.js';

// The CLI's connection flags against servers that require TLS, a client certificate and a user:
// --ca/--cert/--key (and FENCEKIT_CA/CERT/KEY), --user with the password from FENCEKIT_PASSWORD or
// --password-file. Every command runs, and nothing it prints shows the password or the key.

const PASSWORD = 'cli-SECRET-pw-9137';
const WRONG = 'cli-WRONG-pw-2468';
const NO_ENV = {
  FENCEKIT_URL: '',
  FENCEKIT_PASSWORD: '',
  FENCEKIT_CA: '',
  FENCEKIT_CERT: '',
  FENCEKIT_KEY: '',
};

let certs: TestCertificates;
let redis: ServerGroup | undefined;
let etcd: ServerGroup | undefined;
let postgres: ServerGroup | undefined;
const cli = new CliProcesses();

beforeAll(async () => {
  certs = await makeTestCertificates();
  [redis, etcd, postgres] = await Promise.all([
    startSecureRedis(certs, {
      password: PASSWORD,
      adminPassword: 'admin-SECRET-5150',
      clientCertificates: true,
    }),
    startSecureEtcd(certs, { password: PASSWORD, rootPassword: 'root-SECRET-0815' }),
    startSecurePostgres(certs, { password: PASSWORD }),
  ]);
}, 120_000);
afterAll(async () => {
  await cli.stop();
  await Promise.all([redis?.stop(), etcd?.stop(), postgres?.stop()]);
  await certs?.remove();
});

const redisUrl = () => `rediss://${redis?.vars.get('REDIS_HOSTS') ?? ''}`;
const etcdUrl = () =>
  `etcd://${(etcd?.vars.get('ETCD_ENDPOINTS') ?? '').replace(/^https:\/\//, '')}?namespace=${encodeURIComponent(FENCEKIT_PREFIX)}`;
const tlsFlags = () => ['--ca', certs.caFile, '--cert', certs.client.certFile, '--key', certs.client.keyFile];

/** What the output shows of the password, the wrong one or the client key (none, or the test fails). */
function secretsShown(text: string): string[] {
  const keyLines = certs.client.key
    .toString()
    .split('\n')
    .filter((line) => line.length > 20 && !line.startsWith('-----'));
  return [
    ...leaked(text, PASSWORD),
    ...leaked(text, WRONG),
    ...keyLines.filter((line) => text.includes(line)).map(() => 'a line of the private key'),
  ];
}

/** Every command of the CLI, with what it exits with on a working connection. */
const COMMANDS: Array<[string, (n: number) => string[], number]> = [
  ['lock', (n) => ['lock', `flags/${n}`, '--wait', '10000', '--', 'true'], 0],
  ['semaphore', (n) => ['semaphore', `flags/${n}`, '--limit', '2', '--wait', '10000', '--', 'true'], 0],
  // elect campaigns again after its command ended, until signalled: after SIGINT it exits 130, or
  // 0 when the signal came while the command ran (the command's own exit code).
  ['elect', (n) => ['elect', `flags/${n}`, '--', 'sh', '-c', 'echo "term $FENCEKIT_FENCING_TOKEN"'], 130],
  ['leader (none)', (n) => ['leader', `flags/${n}`], 1],
  ['inspect', (n) => ['inspect', `flags/${n}`], 0],
  ['ls', () => ['ls', 'flags/'], 0],
  ['force-release', (n) => ['force-release', `flags/${n}`, '--reason', 'test'], 0],
];

let runs = 0;

/** The command's arguments with the flags before its `--` (after it they would be the command's). */
function withFlags(args: string[], flags: string[]): string[] {
  const end = args.indexOf('--');
  return end < 0 ? [...args, ...flags] : [...args.slice(0, end), ...flags, ...args.slice(end)];
}

describe('connection flags on Redis over mutual TLS with an ACL user', () => {
  it.each(COMMANDS)(
    '%s: --ca/--cert/--key and --user with FENCEKIT_PASSWORD work',
    async (_name, args, code) => {
      const run = cli.start(
        withFlags(args(++runs), ['--url', redisUrl(), ...tlsFlags(), '--user', 'fencekit']),
        {
          env: { ...NO_ENV, FENCEKIT_PASSWORD: PASSWORD },
        },
      );
      if (code === 130) {
        await until('the command ran as leader', () => run.stdout().includes('term '));
        run.child.kill('SIGINT');
      }
      const exit = await run.exited();
      expect(code === 130 ? [0, 130] : [code], run.stderr()).toContain(exit);
      await run.closed();
      expect(secretsShown(`${run.stdout()}\n${run.stderr()}`)).toEqual([]);
    },
  );

  it.each(COMMANDS)(
    '%s: a wrong password from --password-file exits 77 and shows no secret',
    async (_name, args) => {
      const file = join(certs.dir, `wrong-${++runs}.txt`);
      await writeFile(file, `${WRONG}\n`, { mode: 0o600 });
      const out = await cli.run(
        withFlags(args(runs), [
          '--url',
          redisUrl(),
          ...tlsFlags(),
          '--user',
          'fencekit',
          '--password-file',
          file,
        ]),
        {
          env: { ...NO_ENV, FENCEKIT_PASSWORD: PASSWORD },
        },
      );
      expect(out.code, out.stderr).toBe(77);
      expect(out.stderr).toMatch(/AUTH_FAILED/);
      expect(secretsShown(`${out.stdout}\n${out.stderr}`)).toEqual([]);
    },
  );

  it('observe: runs over TLS until SIGINT and shows no secret', async () => {
    const run = cli.start(
      ['observe', `flags/${++runs}`, '--url', redisUrl(), ...tlsFlags(), '--user', 'fencekit'],
      {
        env: { ...NO_ENV, FENCEKIT_PASSWORD: PASSWORD },
      },
    );
    await until('observe printed the current leader', () => run.stdout().includes('\n'));
    run.child.kill('SIGINT');
    expect(await run.exited()).toBe(130);
    await run.closed();
    expect(secretsShown(`${run.stdout()}\n${run.stderr()}`)).toEqual([]);
  });

  it('FENCEKIT_CA, FENCEKIT_CERT and FENCEKIT_KEY stand for the flags; the password file ends at its line end', async () => {
    const file = join(certs.dir, `right-${++runs}.txt`);
    await writeFile(file, `${PASSWORD}\r\n`, { mode: 0o600 });
    const out = await cli.run(
      ['inspect', `flags/${runs}`, '--url', redisUrl(), '--user', 'fencekit', '--password-file', file],
      {
        env: {
          ...NO_ENV,
          FENCEKIT_CA: certs.caFile,
          FENCEKIT_CERT: certs.client.certFile,
          FENCEKIT_KEY: certs.client.keyFile,
        },
      },
    );
    expect(out.code, out.stderr).toBe(0);
  });

  it('a server certificate from an authority --ca does not name exits 77', async () => {
    const out = await cli.run(
      [
        'inspect',
        'flags/untrusted',
        '--url',
        redisUrl(),
        '--ca',
        certs.untrustedCaFile,
        '--cert',
        certs.client.certFile,
        '--key',
        certs.client.keyFile,
        '--user',
        'fencekit',
      ],
      { env: { ...NO_ENV, FENCEKIT_PASSWORD: PASSWORD } },
    );
    expect(out.code, out.stderr).toBe(77);
    expect(secretsShown(`${out.stdout}\n${out.stderr}`)).toEqual([]);
  });
});

describe('connection flags on etcd over mutual TLS with a user limited to its prefix', () => {
  it('the client certificate alone names the user (CN=fencekit)', async () => {
    const out = await cli.run(['lock', `flags/${++runs}`, '--url', etcdUrl(), ...tlsFlags(), '--', 'true'], {
      env: NO_ENV,
    });
    expect(out.code, out.stderr).toBe(0);
  });

  it('--user with FENCEKIT_PASSWORD; a wrong one exits 77 and shows no secret', async () => {
    const right = await cli.run(
      ['inspect', `flags/${++runs}`, '--url', etcdUrl(), ...tlsFlags(), '--user', 'fencekit'],
      {
        env: { ...NO_ENV, FENCEKIT_PASSWORD: PASSWORD },
      },
    );
    expect(right.code, right.stderr).toBe(0);
    const wrong = await cli.run(
      ['inspect', `flags/${++runs}`, '--url', etcdUrl(), ...tlsFlags(), '--user', 'fencekit'],
      {
        env: { ...NO_ENV, FENCEKIT_PASSWORD: WRONG },
      },
    );
    expect(wrong.code, wrong.stderr).toBe(77);
    expect(secretsShown(`${wrong.stdout}\n${wrong.stderr}`)).toEqual([]);
  });
});

describe('connection flags on PostgreSQL that takes TLS only', () => {
  // postgres.sh prints the server's URL with sslmode=verify-full; --ca is fencekit's form instead.
  const pgUrl = () => (postgres?.vars.get('PG_TLS_URL') ?? '').replace(/\?.*$/, '');

  it('--ca and --user with FENCEKIT_PASSWORD: a lock; a wrong password exits 77 and shows no secret', async () => {
    const args = (n: number) => [
      'lock',
      `flags/${n}`,
      '--url',
      pgUrl(),
      '--ca',
      certs.caFile,
      '--user',
      'fencekit',
      '--',
      'true',
    ];
    const right = await cli.run(args(++runs), { env: { ...NO_ENV, FENCEKIT_PASSWORD: PASSWORD } });
    expect(right.code, right.stderr).toBe(0);
    const wrong = await cli.run(args(++runs), { env: { ...NO_ENV, FENCEKIT_PASSWORD: WRONG } });
    expect(wrong.code, wrong.stderr).toBe(77);
    expect(secretsShown(`${wrong.stdout}\n${wrong.stderr}`)).toEqual([]);
  });
});

describe('connectionFrom: what the flags make of the URL', () => {
  const env = {} as NodeJS.ProcessEnv;

  it('puts --user and the password (%-encoded) into the URL, replacing no part of it', async () => {
    const { url } = await connectionFrom(
      { url: 'redis://127.0.0.1:6380/2?tls=1', user: 'app user' },
      { FENCEKIT_PASSWORD: 'p@ss/w:rd' },
    );
    expect(url).toBe('redis://app%20user:p%40ss%2Fw%3Ard@127.0.0.1:6380/2?tls=1');
  });

  it("takes the URL's user with the password given apart", async () => {
    const { url } = await connectionFrom({ url: 'etcd://app@h:2379' }, { FENCEKIT_PASSWORD: 'pw-123456' });
    expect(url).toBe('etcd://app:pw-123456@h:2379');
  });

  it('leaves the URL alone when nothing is given', async () => {
    expect(await connectionFrom({ url: 'etcd://u:p@h:2379' }, env)).toEqual({
      url: 'etcd://u:p@h:2379',
      options: {},
    });
  });

  it.each([
    ['a user in the URL and --user', { url: 'etcd://a@h', user: 'b' }, {}, /--user.*already/],
    [
      'a password in the URL and FENCEKIT_PASSWORD',
      { url: 'etcd://a:x@h' },
      { FENCEKIT_PASSWORD: 'y' },
      /password.*already/,
    ],
    ['--cert without --key', { url: 'etcd://h', cert: '/nonexistent' }, {}, /--cert and --key go together/],
    [
      'an unreadable --ca',
      { url: 'etcd://h', ca: '/nonexistent/ca.pem' },
      {},
      /--ca: the file cannot be read \(ENOENT\)/,
    ],
    ['no URL', {}, {}, /--url: missing/],
  ])('refuses %s (INVALID_ARGUMENT)', async (_what, flags, given, message) => {
    const error = await connectionFrom(flags, given).then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(error?.code).toBe('INVALID_ARGUMENT');
    expect(error?.message).toMatch(message);
  });

  it('refuses an empty password file', async () => {
    const file = join(certs.dir, 'empty.txt');
    await writeFile(file, '\n');
    await expect(connectionFrom({ url: 'etcd://h', passwordFile: file }, env)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/--password-file: the file is empty/),
    });
  });

  it('takes an empty flag (an exported but empty FENCEKIT_CERT=) as not given', async () => {
    expect(
      await connectionFrom({ url: 'etcd://h', ca: '', cert: '', key: '', user: '', passwordFile: '' }, env),
    ).toEqual({
      url: 'etcd://h',
      options: {},
    });
  });

  it('reads --ca, --cert and --key into the tls option', async () => {
    const { options } = await connectionFrom(
      { url: 'redis://h', ca: certs.caFile, cert: certs.client.certFile, key: certs.client.keyFile },
      env,
    );
    expect(options.tls).toEqual({ ca: certs.ca, cert: certs.client.cert, key: certs.client.key });
  });
});
