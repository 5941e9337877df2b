import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, FaultProxy, type ServerGroup, startAll, startServers } from '../servers/index.js';
import { CliProcesses, type CliRun, until } from './cli-process.js';

/** Debian's chromium (docker/native/install-servers.sh installs it), or the one CHROMIUM_PATH names. */
const chromiumPath = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (path): path is string => path !== undefined && path !== '' && existsSync(path),
);
if (!chromiumPath) {
  console.warn(
    'dashboard browser tests skipped: no chromium binary (apt-get install chromium, or set CHROMIUM_PATH)',
  );
}

/** How long the page may take to show a change: the figure is 2 s, this is for a loaded CI. */
const PAGE_WAIT_MS = 10_000;

// `fencekit dashboard` as an operator uses it: the CLI serves the page, holders are other CLI
// processes on real Redis and etcd, and a real headless Chromium renders the page.
describe.skipIf(!chromiumPath)('fencekit dashboard in a browser (chromium)', () => {
  let redis: ServerGroup;
  let etcd: ServerGroup;
  let browser: Browser;
  const cli = new CliProcesses();
  const urls: Record<'redis' | 'etcd', string> = { redis: '', etcd: '' };
  const measured: string[] = [];

  beforeAll(async () => {
    [redis, etcd] = await startAll([startServers('redis'), startServers('etcd')]);
    urls.redis = endpoint(redis, 'REDIS_URL');
    urls.etcd = `etcd://${endpoint(etcd, 'ETCD_ENDPOINTS').replace(/http:\/\//g, '')}?sessionTtlMs=2000`;
    browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  });
  /** The holders' commands: a holder CLI killed with SIGKILL leaves its command (its own session) running. */
  const commands: number[] = [];
  afterEach(async () => {
    await cli.stop();
    for (const pid of commands.splice(0)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already: the CLI ended it
      }
    }
  });
  afterAll(async () => {
    await browser?.close();
    await Promise.all([redis?.stop(), etcd?.stop()]);
    if (measured.length > 0) console.log(`dashboard: time from grant to page, ${measured.join('; ')}`);
  });

  /** Starts `fencekit dashboard` on a free port; resolves with the page's URL. */
  async function dashboard(args: string[]): Promise<{ run: CliRun; url: string }> {
    const run = cli.start(['dashboard', '--port', '0', '--interval', '250', ...args]);
    let url = '';
    await until(`the dashboard listens (stderr: ${run.stderr()})`, () => {
      url = /dashboard on (http:\S+)/.exec(run.stdout())?.[1] ?? '';
      return url !== '' || run.child.exitCode !== null;
    });
    expect(url, run.stderr()).not.toBe('');
    return { run, url };
  }

  /** A CLI holder that prints its fencing token, then runs for `seconds`; resolves with the token. */
  async function holder(args: string[], seconds = 60): Promise<{ run: CliRun; token: string; at: number }> {
    const run = cli.start([
      ...args,
      '--',
      'sh',
      '-c',
      `echo "$FENCEKIT_FENCING_TOKEN"; echo "command $$"; exec sleep ${seconds}`,
    ]);
    let token = '';
    let command = '';
    await until(`${args.slice(0, 2).join(' ')} holds (stderr: ${run.stderr()})`, () => {
      token = /^(\d+)$/m.exec(run.stdout())?.[1] ?? '';
      command = /^command (\d+)$/m.exec(run.stdout())?.[1] ?? '';
      return token !== '' && command !== '';
    });
    commands.push(Number(command));
    return { run, token, at: Date.now() };
  }

  /** Waits until the names view shows token in name's row. */
  async function shows(page: Page, name: string, token: string): Promise<void> {
    await page
      .locator(`tr[data-name="${name}"] td.token`, { hasText: token })
      .waitFor({ timeout: PAGE_WAIT_MS });
  }

  async function inTimeline(page: Page, type: string, name: string, token: string): Promise<void> {
    await page.waitForSelector(
      `#timeline li[data-type="${type}"][data-name="${name}"][data-token="${token}"]`,
      {
        timeout: PAGE_WAIT_MS,
      },
    );
  }

  it.each(['redis', 'etcd'] as const)(
    '%s: a lock, a permit and a leadership with their tokens; a release, a loss (Redis: a lease run out) and a force-release from the page in the timeline',
    async (backend) => {
      const url = urls[backend];
      const prefix = `dash-${process.pid}/`;
      const { url: page_url } = await dashboard([
        '--url',
        url,
        '--prefix',
        prefix,
        '--semaphore',
        `${prefix}jobs=2`,
        '--election',
        `${prefix}leader`,
        '--allow-force-release',
      ]);
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      try {
        await page.goto(page_url);
        const lock = await holder(['lock', `${prefix}orders`, '--url', url, '--owner', 'alice']);
        const permit = await holder([
          'semaphore',
          `${prefix}jobs`,
          '--limit',
          '2',
          '--url',
          url,
          '--owner',
          'bob',
        ]);
        const leader = await holder(['elect', `${prefix}leader`, '--url', url, '--owner', 'carol']);
        const start = Math.max(lock.at, permit.at, leader.at);
        await shows(page, `${prefix}orders`, lock.token);
        await shows(page, `${prefix}jobs`, permit.token);
        await shows(page, `${prefix}leader`, leader.token);
        measured.push(`${backend} ${Date.now() - start} ms`);
        const row = (name: string) => page.locator(`tr[data-name="${name}"]`);
        expect(await row(`${prefix}orders`).locator('td.owner').textContent()).toContain('alice');
        expect(await row(`${prefix}jobs`).locator('td.permits').textContent()).toBe('1 / 2');
        expect(await row(`${prefix}leader`).locator('td.kind').textContent()).toBe('election');

        // A release: a holder whose command ends.
        const brief = await holder(['lock', `${prefix}brief`, '--url', url, '--owner', 'dan'], 1);
        await inTimeline(page, 'release', `${prefix}brief`, brief.token);

        if (backend === 'redis') {
          // A loss: a holder killed with its lease running; the lease runs out.
          const lease = await holder([
            'lock',
            `${prefix}lease`,
            '--url',
            url,
            '--ttl',
            '1000',
            '--owner',
            'erin',
          ]);
          await shows(page, `${prefix}lease`, lease.token);
          process.kill(-(lease.run.child.pid as number), 'SIGKILL');
          await inTimeline(page, 'loss', `${prefix}lease`, lease.token);
        }

        // Force-release from the page: the holder's signal aborts (the CLI kills its command: 137).
        await row(`${prefix}orders`).click();
        await page.waitForSelector('#force-reason', { timeout: PAGE_WAIT_MS });
        // The detail's token history: the grant the page saw, as a point of the chart.
        expect(await page.locator('#detail svg.token-chart circle').count()).toBeGreaterThanOrEqual(1);
        expect(await page.locator('#detail-waiters').textContent()).toMatch(/^0 waiting/);
        await page.fill('#force-reason', 'stuck at 3 a.m.');
        await page.click('#force-release');
        await inTimeline(page, 'force-release', `${prefix}orders`, lock.token);
        const entry = await page
          .locator(`#timeline li[data-type="force-release"][data-token="${lock.token}"]`)
          .textContent();
        expect(entry).toContain('reason: stuck at 3 a.m.');
        expect(entry).toMatch(/by .+ \(dashboard, from 127\.0\.0\.1\)/);
        expect(await lock.run.exited()).toBe(137);
        expect(lock.run.stderr()).toMatch(/no longer held/);
      } finally {
        await page.close();
      }
    },
    60_000,
  );

  it.each(['redis', 'etcd'] as const)(
    '%s: the name detail lists the waiters of two other processes in the order they asked',
    async (backend) => {
      const url = urls[backend];
      const name = `dash-queue-${process.pid}/${backend}`;
      const { url: page_url } = await dashboard(['--url', url, '--prefix', `dash-queue-${process.pid}/`]);
      const lock = await holder(['lock', name, '--url', url, '--owner', 'alice']);
      const page = await browser.newPage();
      try {
        await page.goto(page_url);
        await shows(page, name, lock.token);
        await page.locator(`tr[data-name="${name}"]`).click();
        await page.waitForSelector('#detail-queue-note', { timeout: PAGE_WAIT_MS });
        // Each waiter is in the queue (the detail counts it) before the next one asks.
        for (const [index, owner] of ['bob', 'carol'].entries()) {
          cli.start(['lock', name, '--url', url, '--owner', owner, '--', 'sh', '-c', 'exec sleep 30']);
          await page
            .locator('#detail-waiters', { hasText: `${index + 1} waiting` })
            .waitFor({ timeout: PAGE_WAIT_MS });
        }
        // The list comes with the count that says 2 and is read after it: both are in it, in order.
        const entries = page.locator('#detail-queue li');
        expect(await entries.count()).toBe(2);
        expect(await entries.nth(0).textContent()).toMatch(/^bob — waiting.* — a process’s line/);
        expect(await entries.nth(1).textContent()).toMatch(/^carol — waiting/);
        const detail = (await (await fetch(`${page_url}api/names/${encodeURIComponent(name)}`)).json()) as {
          queue: Array<{ position: number; owner: string; since: string | null; requests: number | null }>;
        };
        expect(detail.queue.map(({ position, owner }) => ({ position, owner }))).toEqual([
          { position: 1, owner: 'bob' },
          { position: 2, owner: 'carol' },
        ]);
        // Another process's entry stands for its line, whose length only that process knows.
        expect(detail.queue.map((entry) => entry.requests)).toEqual([null, null]);
      } finally {
        await page.close();
      }
    },
    60_000,
  );

  it('without --allow-force-release: no button on the page, and the API refuses', async () => {
    const prefix = `dash-off-${process.pid}/`;
    const { url: page_url } = await dashboard(['--url', urls.redis, '--prefix', prefix]);
    const lock = await holder(['lock', `${prefix}orders`, '--url', urls.redis, '--owner', 'alice']);
    const page = await browser.newPage();
    try {
      await page.goto(page_url);
      await shows(page, `${prefix}orders`, lock.token);
      await page.locator(`tr[data-name="${prefix}orders"]`).click();
      await page.waitForSelector('#detail-waiters', { timeout: PAGE_WAIT_MS });
      expect(await page.locator('#force-release').count()).toBe(0);
      expect(await page.locator('#detail-body').textContent()).not.toMatch(/null|undefined/);
      const refused = await fetch(`${page_url}api/force-release`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: `${prefix}orders`, token: lock.token, reason: 'stuck' }),
      });
      expect(refused.status).toBe(403);
      expect(lock.run.child.exitCode).toBeNull();
    } finally {
      await page.close();
    }
  });

  it('a backend outage: a banner on the page and 503 from the API; both recover by themselves', async () => {
    const [host = '', port = ''] = urls.redis.replace('redis://', '').split(':');
    const proxy = await FaultProxy.start({ host, port: Number(port) });
    const prefix = `dash-outage-${process.pid}/`;
    const page = await browser.newPage();
    try {
      const { url: page_url } = await dashboard(['--url', `redis://${proxy.address}`, '--prefix', prefix]);
      const lock = await holder(['lock', `${prefix}orders`, '--url', urls.redis, '--owner', 'alice']);
      await page.goto(page_url);
      await shows(page, `${prefix}orders`, lock.token);
      expect(await page.locator('#banner').isHidden()).toBe(true);
      proxy.setMode({ kind: 'refuse' });
      await page.locator('#banner', { hasText: 'Backend unavailable' }).waitFor({ timeout: PAGE_WAIT_MS });
      expect((await fetch(`${page_url}api/names`)).status).toBe(503);
      proxy.setMode({ kind: 'pass' });
      await page.locator('#banner').waitFor({ state: 'hidden', timeout: PAGE_WAIT_MS });
      await shows(page, `${prefix}orders`, lock.token);
      expect((await fetch(`${page_url}api/names`)).status).toBe(200);
    } finally {
      await page.close();
      await proxy.close();
    }
  });

  it('with a token: every request needs it, and the CLI never prints it', async () => {
    const token = `dashboard-token-${process.pid}-secret`;
    const run = cli.start(['dashboard', '--url', urls.redis, '--port', '0'], {
      env: { FENCEKIT_DASHBOARD_TOKEN: token },
    });
    let page_url = '';
    await until('the dashboard listens', () => {
      page_url = /dashboard on (http:\S+)/.exec(run.stdout())?.[1] ?? '';
      return page_url !== '';
    });
    expect((await fetch(`${page_url}api/names`)).status).toBe(401);
    const page = await browser.newPage();
    try {
      await page.goto(`${page_url}?token=${token}`);
      expect(page.url()).toBe(page_url); // the cookie carries it from here; the address bar loses it
      await page.waitForSelector('#updated:not(:empty)', { timeout: PAGE_WAIT_MS });
    } finally {
      await page.close();
    }
    run.child.kill('SIGINT');
    expect(await run.exited()).toBe(130);
    await run.closed();
    expect(run.stdout() + run.stderr()).not.toContain(token);
  });

  it('an unknown name is 404 JSON; a non-loopback bind without a token, and a port in use, are refused (exit 64)', async () => {
    const { url: page_url } = await dashboard(['--url', urls.redis, '--prefix', `dash-none-${process.pid}/`]);
    const unknown = await fetch(`${page_url}api/names/no%2Fsuch%2Fname`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'no such name', name: 'no/such/name' });
    const { code, stderr } = await cli.run(['dashboard', '--url', urls.redis, '--host', '0.0.0.0'], {
      env: { FENCEKIT_DASHBOARD_TOKEN: '' },
    });
    expect(code).toBe(64);
    expect(stderr).toMatch(/--host.*0\.0\.0\.0 is not a loopback address.*--auth-token/);
    const taken = await cli.run(['dashboard', '--url', urls.redis, '--port', new URL(page_url).port]);
    expect(taken.code).toBe(64);
    expect(taken.stderr).toMatch(/--port.*is in use/);
  });
});
