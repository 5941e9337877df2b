import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { BackendUnavailableError, connect } from '../../src/index.js';
import { SecretMask } from '../../src/secret-mask.js';
import { Redactor } from '../../src/telemetry/redact.js';
import { Outputs } from './secret-outputs.js';

/**
 * What a driver's error may carry besides its message (an AUTH command with its arguments, a
 * config, a hidden options field), and which lengths of secret are looked for where.
 */

const LONG = 'Zq4Mask/Hidden?Pw';
const SHORT = 'q7';
const FOUR = 'app1';

/** The process is given these passwords, as an app's connect() calls give them. */
async function given(url: string): Promise<void> {
  await (await connect(url)).close();
}

const shown = (value: unknown) => inspect(value, { showHidden: true, depth: 10 });

describe('a cause that holds a credential outside its message', () => {
  it('an AUTH command with its arguments (ioredis ReplyError): a masked copy without the object fields', async () => {
    await given(`memory://app:${encodeURIComponent(LONG)}@mask-auth`);
    const reply = Object.assign(new Error('WRONGPASS invalid username-password pair'), {
      name: 'ReplyError',
      command: { name: 'auth', args: ['app', LONG] },
    });
    const error = new BackendUnavailableError('redis refused the login', { cause: reply });
    expect(shown(error)).not.toContain(LONG);
    expect(error.cause).toMatchObject({
      name: 'ReplyError',
      message: 'WRONGPASS invalid username-password pair',
    });
    expect((error.cause as { command?: unknown }).command).toBeUndefined();
  });

  it("a pool's config and a hidden options field (pg, a client): found through inspect, left out", async () => {
    await given(`memory://app:${encodeURIComponent(LONG)}@mask-config`);
    const config = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {
      code: 'ECONNREFUSED',
      config: { user: 'app', password: LONG },
    });
    const hidden = new Error('socket closed');
    Object.defineProperty(hidden, 'options', { value: { password: LONG }, enumerable: false });
    for (const cause of [config, hidden]) {
      const error = new BackendUnavailableError('cannot connect', { cause });
      expect(shown(error)).not.toContain(LONG);
      expect((error.cause as Error).message).toBe(cause.message);
    }
    expect((new BackendUnavailableError('x', { cause: config }).cause as { code?: unknown }).code).toBe(
      'ECONNREFUSED',
    );
  });

  it('a secret two causes down: the chain is copied, masked, to the end', async () => {
    await given(`memory://app:${encodeURIComponent(LONG)}@mask-deep`);
    const root = Object.assign(new Error('auth failed'), { config: { password: LONG } });
    const middle = new Error('pool error', { cause: root });
    const error = new BackendUnavailableError('cannot connect', { cause: middle });
    expect(shown(error)).not.toContain(LONG);
    expect((error.cause as Error).message).toBe('pool error');
    expect(((error.cause as Error).cause as Error).message).toBe('auth failed');
  });

  it('a harmless cause is kept as it is, object fields and all', () => {
    const harmless = Object.assign(new Error('socket hang up'), { config: { host: 'db' } });
    expect(new BackendUnavailableError('cannot connect', { cause: harmless }).cause).toBe(harmless);
  });

  it('events and log lines (the Redactor): an error whose message is harmless but whose fields or cause are not', () => {
    const redactor = new Redactor([LONG]);
    const withOptions = Object.assign(new Error('timeout'), { options: { password: LONG } });
    const withCause = new Error('renewal failed', { cause: new Error(`AUTH ${LONG} refused`) });
    for (const error of [withOptions, withCause]) {
      const safe = redactor.error(error);
      expect(shown(safe)).not.toContain(LONG);
      expect((safe as Error).message).toBe(error.message);
    }
    const harmless = new Error('timeout');
    expect(redactor.error(harmless)).toBe(harmless);
  });
});

describe('which lengths are looked for where', () => {
  it('a short password stands for itself in a URL and in a password field, whatever its length', async () => {
    await given(`memory://app:${SHORT}@mask-short`);
    const typeError = Object.assign(new TypeError('Invalid URL'), { input: `redis://app:${SHORT}@h:1/x` });
    expect((new BackendUnavailableError('x', { cause: typeError }).cause as { input?: unknown }).input).toBe(
      'redis://app:***@h:1/x',
    );
    const field = Object.assign(new Error('auth failed'), { password: SHORT, user: 'app' });
    const masked = new BackendUnavailableError('x', { cause: field }).cause as {
      password?: unknown;
      user?: unknown;
    };
    expect(masked.password).toBe('***');
    expect(masked.user).toBe('app');
    // With a / in it, a short password still goes where it stands between ':' and '@'.
    await given(`memory://app:${encodeURIComponent('a/b')}@mask-slash`);
    const slash = Object.assign(new TypeError('Invalid URL'), { input: 'redis://:a/b@h:1' });
    expect((new BackendUnavailableError('x', { cause: slash }).cause as { input?: unknown }).input).toBe(
      'redis://:***@h:1',
    );
    const redactor = new Redactor([SHORT]);
    expect(redactor.error(SHORT)).toBe('***');
    expect(redactor.text(`postgres://app:${SHORT}@db/x`)).toBe('postgres://app:***@db/x');
  });

  it('a secret shorter than six characters masks no ordinary text, in a message or a stack frame', async () => {
    await given(`memory://app:${FOUR}@mask-four`);
    const error = new BackendUnavailableError(`lock "${FOUR}-orders" is not reachable`);
    expect(error.message).toBe(`lock "${FOUR}-orders" is not reachable`);
    const frames = new Error('x');
    frames.stack = `Error: x\n    at run (/srv/${FOUR}/worker.js:1:2)`;
    expect(new BackendUnavailableError('y', { cause: frames }).cause).toBe(frames);
    expect(new Redactor([FOUR]).text(`job ${FOUR}-nightly`)).toBe(`job ${FOUR}-nightly`);
  });

  it('a secret of six characters or more is masked anywhere, stack frames included', async () => {
    await given(`memory://app:${encodeURIComponent(LONG)}@mask-frames`);
    const frames = new Error('x');
    frames.stack = `Error: x\n    at run (/srv/${LONG}/worker.js:1:2)`;
    const cause = new BackendUnavailableError('y', { cause: frames }).cause as Error;
    expect(cause.stack).toBe('Error: x\n    at run (/srv/***/worker.js:1:2)');
  });

  it('a metric attribute and an event key that quote a password are masked', async () => {
    const out = new Outputs();
    const provider = await connect(`memory://app:${encodeURIComponent(LONG)}@mask-metrics`, {
      ...out.options(),
      metricsNameAttribute: true,
    });
    out.listen(provider);
    const lock = await provider.tryAcquire(`jobs/${LONG}`);
    await lock?.release();
    await provider.close();
    await out.collectMetrics();
    expect(lock?.fencingToken).toBeDefined();
    expect(out.all()).toContain('jobs/***');
    expect(out.all()).not.toContain(LONG);
  });

  it("a force-release's event and audit warning that quote a password are masked", async () => {
    const provider = await connect(`memory://app:${encodeURIComponent(LONG)}@mask-force`);
    const events: unknown[] = [];
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name} ${warning.message}`);
    process.on('warning', onWarning);
    try {
      provider.on?.('force-release', (event) => events.push(event));
      await provider.acquire('force/k', { owner: `worker with ${LONG}` });
      const removed = await provider.forceRelease?.('force/k', {
        reason: `rotating ${LONG}`,
        by: `ops ${LONG}`,
      });
      expect(removed?.fencingToken).toBeDefined();
      await new Promise((resolve) => setImmediate(resolve)); // process warnings are emitted on the next tick
    } finally {
      process.off('warning', onWarning);
      await provider.close();
    }
    expect(events).toHaveLength(1);
    expect(warnings.filter((line) => line.startsWith('FencekitAudit'))).toHaveLength(1);
    expect(shown([events, warnings])).not.toContain(LONG);
    expect(shown(events)).toContain('rotating ***');
  });
});

describe('a short secret that a message quotes whole is masked wherever it is found', () => {
  const quoted = [
    { password: 'k9Zq', message: (pw: string) => `password '${pw}' rejected by the server` },
    { password: 'x7!pQ', message: (pw: string) => `etcdserver: authentication failed, password "${pw}"` },
    { password: 'abc12', message: (pw: string) => `KeeperErrorCode = AuthFailed for digest 'user:${pw}'` },
  ];

  it.each(quoted.map((row, i) => ({ ...row, i })))(
    "a cause's message, and so its stack, that quote the password $password: masked in the copy",
    async ({ password, message, i }) => {
      await given(`memory://user:${encodeURIComponent(password)}@mask-quoted-${i}`);
      const cause = new Error(message(password));
      const error = new BackendUnavailableError('cannot connect', { cause });
      const copy = error.cause as Error;
      expect(copy).not.toBe(cause);
      expect(copy.message).toBe(message('***'));
      expect(copy.stack).not.toContain(password);
      expect(shown(error)).not.toContain(password);
      expect(new BackendUnavailableError(message(password)).message).toBe(message('***'));
    },
  );

  it('the same secret unquoted inside other words is left alone', () => {
    const mask = new SecretMask(['abc12']);
    for (const text of [
      'job abc12-nightly',
      "lock 'abc12-orders'",
      'at /srv/abc12/worker.js:1:2',
      "'xabc12'",
    ])
      expect(mask.text(text)).toBe(text);
  });

  it('whatever short secret and wherever it stands: an error or a text that shows it is masked so that it shows it no more', () => {
    let seed = 7;
    const random = (below: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % below;
    };
    const alphabet = 'abcXYZ019:@\'"-/.%';
    const pick = (length: number) => Array.from({ length }, () => alphabet[random(alphabet.length)]).join('');
    const places = [
      (pw: string) => `'${pw}'`,
      (pw: string) => `"${pw}"`,
      (pw: string) => `'user:${pw}'`,
      (pw: string) => `redis://u:${pw}@h:1`,
      (pw: string) => `x:${pw}@y`,
      (pw: string) => pw,
      (pw: string) => `a ${pw} b`,
    ];
    let shown = 0;
    for (let round = 0; round < 2000; round++) {
      const secret = pick(1 + random(5));
      const mask = new SecretMask([secret]);
      const text = `${pick(random(4))}${places[random(places.length)]?.(secret)}${pick(random(4))}`;
      const cause = Object.assign(new Error(text), { detail: text });
      if (!mask.shows(cause)) continue;
      shown++;
      const where = `${JSON.stringify(secret)} in ${JSON.stringify(text)}`;
      expect(mask.shows(mask.value(cause)), where).toBe(false);
      expect(mask.shows(mask.value(text)), where).toBe(false);
    }
    expect(shown).toBeGreaterThan(500);
  });
});
