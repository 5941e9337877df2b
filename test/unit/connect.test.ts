import { describe, expect, it } from 'vitest';
import { connect } from '../../src/index.js';
import { parseConnectionUrl } from '../../src/provider-kit.js';

describe('parseConnectionUrl', () => {
  it("refuses a control character, which a WHATWG URL parser (pg's) would delete and so read another URL", () => {
    for (const url of [
      'postgres://u:p@db/x?tls=1&ssl\tmode=disable',
      'etcd://h\n:2379',
      'redis://h/0?x=\r1',
    ]) {
      expect(() => parseConnectionUrl(url), JSON.stringify(url)).toThrow(/contains a control character/);
    }
  });

  it('reads every scheme of DESIGN §2', () => {
    const etcd = parseConnectionUrl('etcd://h1:2379,h2:2380?namespace=app/');
    expect(etcd.backend).toBe('etcd');
    expect(etcd.hosts).toEqual([
      { host: 'h1', port: 2379 },
      { host: 'h2', port: 2380 },
    ]);
    expect(etcd.params.get('namespace')).toBe('app/');

    const zk = parseConnectionUrl('zk://h1:2181,h2/locks/app');
    expect(zk.backend).toBe('zookeeper');
    expect(zk.hosts[1]).toEqual({ host: 'h2', port: 2181 });
    expect(zk.path).toBe('locks/app');

    const redis = parseConnectionUrl('redis://:s%40cret@127.0.0.1:6380/2');
    expect(redis).toMatchObject({ backend: 'redis', password: 's@cret', username: undefined, path: '2' });

    const redlock = parseConnectionUrl('redlock://a:1,b:2,c:3');
    expect(redlock.hosts.map((h) => h.port)).toEqual([1, 2, 3]);

    const pg = parseConnectionUrl('postgres://app:pw@db.example:5433/orders');
    expect(pg).toMatchObject({ backend: 'postgres', username: 'app', password: 'pw', path: 'orders' });
    expect(pg.hosts).toEqual([{ host: 'db.example', port: 5433 }]);
    expect(parseConnectionUrl('postgresql://u@[::1]/db').hosts).toEqual([{ host: '::1', port: 5432 }]);

    expect(parseConnectionUrl('memory://').path).toBe('');
    expect(parseConnectionUrl('memory://demo').path).toBe('demo');
  });

  it.each([
    ['', /non-empty/],
    ['localhost:2379', /not of the form scheme:\/\//],
    ['mysql://localhost', /unknown scheme "mysql:\/\/"/],
    ['etcd://', /needs at least one host/],
    ['etcd://h1:99999', /port of host 1 is out of range/],
    ['etcd://h1:2379,,h2', /host 2 of the URL is not a host/],
    ['redis://a:1,b:2', /use redlock:\/\//],
    ['redis://localhost/cache', /database number/],
    ['redlock://a:1,b:2', /at least 3/],
    ['postgres://u:p@h/%zz', /malformed %-escape/],
  ])('refuses %j and says why', (url, why) => {
    expect(() => parseConnectionUrl(url)).toThrow(why);
    try {
      parseConnectionUrl(url);
    } catch (error) {
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'url' });
    }
  });

  it('never repeats a password in an error', () => {
    for (const url of ['postgres://u:hunter2@h/db#x', 'postgres://u:hunter2@h:1:2/db']) {
      expect(() => parseConnectionUrl(url)).toThrow(/invalid url/);
      expect(() => parseConnectionUrl(url)).not.toThrow(/hunter2/);
    }
    expect(() => parseConnectionUrl('postgres://u:hunter2@h/db#x')).toThrow(/must be %-encoded/);
  });
});

describe('connect', () => {
  it('memory:// providers with one name share one lock space', async () => {
    const a = await connect('memory://connect-test');
    const b = await connect('memory://connect-test');
    const other = await connect('memory://elsewhere');
    const lock = await a.acquire('k');
    expect(await b.tryAcquire('k')).toBeNull();
    const elsewhere = await other.tryAcquire('k');
    expect(elsewhere).not.toBeNull();
    await Promise.all([a.close(), b.close(), other.close()]);
    expect(lock.held).toBe(false);
  });

  it('an unreachable backend fails with BACKEND_UNAVAILABLE instead of hanging', async () => {
    const provider = await connect('redis://127.0.0.1:1', { callTimeoutMs: 200 });
    try {
      await expect(provider.tryAcquire('k')).rejects.toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
    } finally {
      await provider.close();
    }
  });
});
