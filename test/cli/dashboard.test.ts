import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/index.js';
import { eventually } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startAll, startServers } from '../servers/index.js';
import { until } from './cli-process.js';
import { DashboardProcesses, type Holder } from './dashboard-process.js';

/** A browser the page is tested in, driven by puppeteer-core (CDP for Chromium, WebDriver BiDi for Firefox). */
interface BrowserTarget {
  name: 'chromium' | 'firefox';
  /** The Debian package's binary (docker/native/install-servers.sh installs both), or the env's. */
  path: string | undefined;
  launch(path: string): Promise<Browser>;
}

const firstExisting = (...paths: Array<string | undefined>) =>
  paths.find((path): path is string => path !== undefined && path !== '' && existsSync(path));
const viewport = { width: 1280, height: 800 };
/** How long a browser may take to start: a bound for a hang, reached only by one (a busy CI took 60 s for both). */
const LAUNCH_WAIT_MS = 90_000;

const chromium: BrowserTarget = {
  name: 'chromium',
  path: firstExisting(process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'),
  launch: (path) =>
    puppeteer.launch({
      browser: 'chrome',
      executablePath: path,
      args: ['--no-sandbox'],
      defaultViewport: viewport,
      timeout: LAUNCH_WAIT_MS,
    }),
};
const firefox: BrowserTarget = {
  name: 'firefox',
  path: firstExisting(process.env.FIREFOX_PATH, '/usr/bin/firefox-esr', '/usr/bin/firefox'),
  launch: (path) =>
    puppeteer.launch({
      browser: 'firefox',
      executablePath: path,
      defaultViewport: viewport,
      timeout: LAUNCH_WAIT_MS,
    }),
};
for (const [target, install] of [
  [chromium, 'apt-get install chromium, or set CHROMIUM_PATH'],
  [firefox, 'apt-get install firefox-esr, or set FIREFOX_PATH'],
] as const) {
  if (!target.path) console.warn(`dashboard browser tests skipped in ${target.name}: no binary (${install})`);
}

/**
 * How long the page may take to show a change: 2 s is the aim; this is for a CI whose machine is
 * busy with other work (an open detail may wait for the next unchanged state, every 5 s).
 */
const PAGE_WAIT_MS = 20_000;

/** The little of the page's DOM the checks read inside the page (the project compiles without the DOM library). */
declare const document: {
  querySelectorAll(selector: string): Iterable<{ textContent: string | null }>;
  getElementById(id: string): { dataset: Record<string, string | undefined> } | null;
  querySelector(selector: string): {
    dataset: Record<string, string | undefined>;
    getBoundingClientRect(): Record<'x' | 'y' | 'width' | 'height', number>;
  } | null;
};

/** Waits until an element that selector matches has text in it. */
async function hasText(page: Page, selector: string, text: string): Promise<void> {
  await page.waitForFunction(
    (selector: string, text: string) =>
      [...document.querySelectorAll(selector)].some((node) => node.textContent?.includes(text)),
    { timeout: PAGE_WAIT_MS, polling: 100 },
    selector,
    text,
  );
}

/** Clicks what selector matches; tried again if the page redrew it in between (rows are redrawn on every change). */
async function click(page: Page, selector: string): Promise<void> {
  await page.locator(selector).setTimeout(PAGE_WAIT_MS).click();
}

/** The text of the element that selector matches. */
function textOf(page: Page, selector: string): Promise<string | null> {
  return page.$eval(selector, (node) => node.textContent);
}

/** A page open in one of the browsers. */
interface BrowserPage {
  browser: BrowserTarget['name'];
  page: Page;
}

/**
 * Runs check on each page in turn; a failure names its browser. The processes and the backend a
 * test sets up are the same for both browsers: only the page differs. In turn, not at once: two
 * browsers drawing at the same time took the CPU from the tests that run beside this file (the
 * torture suites' liveness bounds).
 */
async function inEachPage(pages: BrowserPage[], check: (open: BrowserPage) => Promise<void>): Promise<void> {
  for (const open of pages) {
    try {
      await check(open);
    } catch (error) {
      (error as Error).message = `in ${open.browser}: ${(error as Error).message}`;
      throw error;
    }
  }
}

// `fencekit dashboard` as an operator uses it: the CLI serves the page, holders are other CLI
// processes on real Redis and etcd, and a real headless Chromium and Firefox render the page. Each
// test starts its dashboard and holders once and checks the page in both browsers side by side;
// each browser is launched once for the file.
const targets = [chromium, firefox].filter((target) => target.path !== undefined);
describe.skipIf(targets.length === 0)(
  `fencekit dashboard in a browser (${targets.map((target) => target.name).join(', ')})`,
  { timeout: 120_000 }, // several page waits in turn, each up to PAGE_WAIT_MS
  () => {
    let redis: ServerGroup;
    let etcd: ServerGroup;
    const browsers = new Map<BrowserTarget['name'], Browser>();
    const processes = new DashboardProcesses();
    const { cli, dashboard, holder } = processes;
    const urls: Record<'redis' | 'etcd', string> = { redis: '', etcd: '' };
    const measured: string[] = [];

    beforeAll(
      async () => {
        // One browser after the other: two starting at once take the CPU from the files beside this one.
        const launched = (async () => {
          for (const target of targets) {
            const browser = await target.launch(target.path as string);
            browsers.set(target.name, browser);
            // The browser named is the one driven ("firefox/153.0", "Chrome/156.0…"), not a stand-in.
            expect((await browser.version()).toLowerCase()).toContain(
              target.name === 'firefox' ? 'firefox' : 'chrome',
            );
          }
        })();
        launched.catch(() => undefined); // awaited below, after the servers
        [redis, etcd] = await startAll([startServers('redis'), startServers('etcd')]);
        urls.redis = endpoint(redis, 'REDIS_URL');
        urls.etcd = `etcd://${endpoint(etcd, 'ETCD_ENDPOINTS').replace(/http:\/\//g, '')}?sessionTtlMs=2000`;
        await launched;
      },
      2 * LAUNCH_WAIT_MS + 30_000,
    );
    afterEach(async () => {
      await processes.stop();
    });
    afterAll(async () => {
      await Promise.all([...browsers.values()].map((browser) => browser.close()));
      await Promise.all([redis?.stop(), etcd?.stop()]);
      if (measured.length > 0) console.log(`dashboard: time from grant to page, ${measured.join('; ')}`);
    });

    /** A new page in every browser; closed by closePages. */
    async function openPages(): Promise<BrowserPage[]> {
      return Promise.all(
        [...browsers].map(async ([name, browser]) => ({ browser: name, page: await browser.newPage() })),
      );
    }

    async function closePages(pages: BrowserPage[]): Promise<void> {
      await Promise.all(pages.map(({ page }) => page.close()));
    }

    /** Waits until the names view shows token in name's row. */
    async function shows(page: Page, name: string, token: string): Promise<void> {
      await hasText(page, `tr[data-name="${name}"] td.token`, token);
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
        const pages = await openPages();
        try {
          await inEachPage(pages, async ({ page }) => {
            await page.goto(page_url);
          });
          // Each browser force-releases a lock of its own.
          const orders = (browser: string) => `${prefix}orders-${browser}`;
          const [locks, permit, leader] = await Promise.all([
            Promise.all(
              pages.map(({ browser }) => holder(['lock', orders(browser), '--url', url, '--owner', 'alice'])),
            ),
            holder(['semaphore', `${prefix}jobs`, '--limit', '2', '--url', url, '--owner', 'bob']),
            holder(['elect', `${prefix}leader`, '--url', url, '--owner', 'carol']),
          ]);
          const lockOf = (browser: string) =>
            locks[pages.findIndex((open) => open.browser === browser)] as Holder;
          const start = Math.max(...locks.map((lock) => lock.at), permit.at, leader.at);
          const row = (name: string) => `tr[data-name="${name}"]`;
          await inEachPage(pages, async ({ browser, page }) => {
            await Promise.all([
              ...pages.map((open) => shows(page, orders(open.browser), lockOf(open.browser).token)),
              shows(page, `${prefix}jobs`, permit.token),
              shows(page, `${prefix}leader`, leader.token),
            ]);
            measured.push(`${backend} in ${browser} ${Date.now() - start} ms`);
            expect(await textOf(page, `${row(orders(browser))} td.owner`)).toContain('alice');
            expect(await textOf(page, `${row(`${prefix}jobs`)} td.permits`)).toBe('1 / 2');
            expect(await textOf(page, `${row(`${prefix}leader`)} td.kind`)).toBe('election');
          });

          // A release: a holder whose command ends.
          const brief = await holder(['lock', `${prefix}brief`, '--url', url, '--owner', 'dan'], 1);
          await inEachPage(pages, ({ page }) => inTimeline(page, 'release', `${prefix}brief`, brief.token));

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
            await inEachPage(pages, ({ page }) => shows(page, `${prefix}lease`, lease.token));
            process.kill(-(lease.run.child.pid as number), 'SIGKILL');
            await inEachPage(pages, ({ page }) => inTimeline(page, 'loss', `${prefix}lease`, lease.token));
          }

          // Force-release from the page: the holder's signal aborts (the CLI kills its command: 137).
          await inEachPage(pages, async ({ browser, page }) => {
            const lock = lockOf(browser);
            await click(page, row(orders(browser)));
            await page.waitForSelector('#force-reason', { timeout: PAGE_WAIT_MS });
            // The detail's token history: the grant the page saw, as a point of the chart.
            expect((await page.$$('#detail svg.token-chart circle')).length).toBeGreaterThanOrEqual(1);
            expect(await textOf(page, '#detail-waiters')).toMatch(/^0 waiting/);
            await page.locator('#force-reason').setTimeout(PAGE_WAIT_MS).fill('stuck at 3 a.m.');
            // The detail is redrawn as the looks come in; a reason being typed outlives the redraws.
            const drawn = Number(await page.$eval('#detail-body', (body) => body.dataset.drawn));
            await page.waitForFunction(
              (before) => Number(document.getElementById('detail-body')?.dataset.drawn) > before,
              { timeout: 2 * PAGE_WAIT_MS }, // an unchanged state comes every 5 s
              drawn,
            );
            expect(
              await page.$eval('#force-reason', (input) => (input as unknown as { value: string }).value),
            ).toBe('stuck at 3 a.m.');
            await click(page, '#force-release');
            await inTimeline(page, 'force-release', orders(browser), lock.token);
            const entry = await textOf(
              page,
              `#timeline li[data-type="force-release"][data-token="${lock.token}"]`,
            );
            expect(entry).toContain('reason: stuck at 3 a.m.');
            expect(entry).toMatch(/by .+ \(dashboard, from 127\.0\.0\.1\)/);
            expect(await lock.run.exited()).toBe(137);
            expect(lock.run.stderr()).toMatch(/no longer held/);
          });
        } finally {
          await closePages(pages);
        }
      },
      120_000,
    );

    it.each(['redis', 'etcd'] as const)(
      '%s: the name detail lists the waiters of two other processes in the order they asked',
      async (backend) => {
        const url = urls[backend];
        const name = `dash-queue-${process.pid}/${backend}`;
        const { url: page_url } = await dashboard(['--url', url, '--prefix', `dash-queue-${process.pid}/`]);
        const lock = await holder(['lock', name, '--url', url, '--owner', 'alice']);
        const pages = await openPages();
        try {
          await inEachPage(pages, async ({ page }) => {
            await page.goto(page_url);
            await shows(page, name, lock.token);
            await click(page, `tr[data-name="${name}"]`);
            await page.waitForSelector('#detail-queue-note', { timeout: PAGE_WAIT_MS });
          });
          // Each waiter is in the queue (the dashboard counts it, then the detail) before the next
          // one asks; a CLI process's start is not the page's delay, so it gets a bound of its own.
          for (const [index, owner] of ['bob', 'carol'].entries()) {
            cli.start(['lock', name, '--url', url, '--owner', owner, '--', 'sh', '-c', 'exec sleep 30']);
            await eventually(
              `${owner} waits`,
              async () => {
                const state = (await (await fetch(`${page_url}api/names`)).json()) as {
                  names?: Array<{ name: string; waiters: number }>;
                };
                return state.names?.find((row) => row.name === name)?.waiters === index + 1;
              },
              30_000,
            );
            await inEachPage(pages, ({ page }) => hasText(page, '#detail-waiters', `${index + 1} waiting`));
          }
          // The list comes with the count that says 2 and is read after it: both are in it, in order.
          await inEachPage(pages, async ({ page }) => {
            const entries = await page.$$eval('#detail-queue li', (nodes) =>
              nodes.map((node) => node.textContent),
            );
            expect(entries).toHaveLength(2);
            expect(entries[0]).toMatch(/^bob — waiting.* — a process’s line/);
            expect(entries[1]).toMatch(/^carol — waiting/);
          });
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
          await closePages(pages);
        }
      },
      120_000,
    );

    it('without --allow-force-release: no button on the page, and the API refuses', async () => {
      const prefix = `dash-off-${process.pid}/`;
      const { url: page_url } = await dashboard(['--url', urls.redis, '--prefix', prefix]);
      const lock = await holder(['lock', `${prefix}orders`, '--url', urls.redis, '--owner', 'alice']);
      const pages = await openPages();
      try {
        await inEachPage(pages, async ({ page }) => {
          await page.goto(page_url);
          await shows(page, `${prefix}orders`, lock.token);
          await click(page, `tr[data-name="${prefix}orders"]`);
          await page.waitForSelector('#detail-waiters', { timeout: PAGE_WAIT_MS });
          expect(await page.$('#force-release')).toBeNull();
          expect(await textOf(page, '#detail-body')).not.toMatch(/null|undefined/);
        });
        const refused = await fetch(`${page_url}api/force-release`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: `${prefix}orders`, token: lock.token, reason: 'stuck' }),
        });
        expect(refused.status).toBe(403);
        expect(lock.run.child.exitCode).toBeNull();
        const unknown = await fetch(`${page_url}api/names/no%2Fsuch%2Fname`);
        expect(unknown.status).toBe(404);
        expect(await unknown.json()).toEqual({ error: 'no such name', name: 'no/such/name' });
      } finally {
        await closePages(pages);
      }
    });

    it('a click whose press and release fall on either side of a redraw of the names opens the detail', async () => {
      const prefix = `dash-click-${process.pid}/`;
      const { url: page_url } = await dashboard(['--url', urls.redis, '--prefix', prefix]);
      const lock = await holder(['lock', `${prefix}orders`, '--url', urls.redis, '--owner', 'alice']);
      const row = `tr[data-name="${prefix}orders"]`;
      const pages = await openPages();
      try {
        await inEachPage(pages, async ({ page }) => {
          await page.goto(page_url);
          await shows(page, `${prefix}orders`, lock.token);
          // Found and read in one evaluation: a handle to the row goes stale at the next redraw.
          const box = await page.evaluate((selector: string) => {
            const { x, y, width, height } = document.querySelector(selector)?.getBoundingClientRect() ?? {};
            return { x: x ?? 0, y: y ?? 0, width: width ?? 0, height: height ?? 0 };
          }, row);
          expect(box.width).toBeGreaterThan(0);
          await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
          await page.mouse.down();
          // The rows are drawn again (ages count on every second) while the button is down.
          await page.evaluate((selector: string) => {
            const node = document.querySelector(selector);
            if (node) node.dataset.pressed = 'yes';
          }, row);
          await page.waitForFunction(
            (selector: string) => document.querySelector(selector)?.dataset.pressed === undefined,
            { timeout: PAGE_WAIT_MS },
            row,
          );
          await page.mouse.up();
          await page.waitForSelector('#detail-waiters', { timeout: PAGE_WAIT_MS });
          expect(await page.$(`${row}.selected`)).not.toBeNull();
        });
      } finally {
        await closePages(pages);
      }
    });

    it('a backend outage: a banner on the page and 503 from the API; both recover by themselves', async () => {
      const [host = '', port = ''] = urls.redis.replace('redis://', '').split(':');
      const proxy = await FaultProxy.start({ host, port: Number(port) });
      const prefix = `dash-outage-${process.pid}/`;
      const pages = await openPages();
      try {
        const { url: page_url } = await dashboard(['--url', `redis://${proxy.address}`, '--prefix', prefix]);
        const lock = await holder(['lock', `${prefix}orders`, '--url', urls.redis, '--owner', 'alice']);
        await inEachPage(pages, async ({ page }) => {
          await page.goto(page_url);
          await shows(page, `${prefix}orders`, lock.token);
          expect(await page.$('#banner:not([hidden])')).toBeNull();
        });
        proxy.setMode({ kind: 'refuse' });
        await inEachPage(pages, ({ page }) => hasText(page, '#banner:not([hidden])', 'Backend unavailable'));
        expect((await fetch(`${page_url}api/names`)).status).toBe(503);
        proxy.setMode({ kind: 'pass' });
        await inEachPage(pages, async ({ page }) => {
          await page.waitForSelector('#banner', { hidden: true, timeout: PAGE_WAIT_MS });
          await shows(page, `${prefix}orders`, lock.token);
        });
        expect((await fetch(`${page_url}api/names`)).status).toBe(200);
      } finally {
        await closePages(pages);
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
      const pages = await openPages();
      try {
        await inEachPage(pages, async ({ page }) => {
          await page.goto(`${page_url}?token=${token}`);
          expect(page.url()).toBe(page_url); // the cookie carries it from here; the address bar loses it
          await page.waitForSelector('#updated:not(:empty)', { timeout: PAGE_WAIT_MS });
        });
      } finally {
        await closePages(pages);
      }
      run.child.kill('SIGINT');
      expect(await run.exited()).toBe(130);
      await run.closed();
      expect(run.stdout() + run.stderr()).not.toContain(token);
    });

    it('a page of another origin cannot force-release: its preflight and its plain POST are refused, the lock stays', async () => {
      const prefix = `dash-csrf-${process.pid}/`;
      const name = `${prefix}orders`;
      const { url: page_url } = await dashboard([
        '--url',
        urls.redis,
        '--prefix',
        prefix,
        '--allow-force-release',
      ]);
      const lock = await holder(['lock', name, '--url', urls.redis, '--owner', 'alice']);
      // Another site, on another port of this machine: its page sends the requests from the browser.
      const elsewhere = createServer((_, response) =>
        response.end('<!doctype html><title>elsewhere</title>'),
      );
      await new Promise<void>((listening) => elsewhere.listen(0, '127.0.0.1', listening));
      const pages = await openPages();
      const provider = await connect(urls.redis);
      try {
        await inEachPage(pages, async ({ page }) => {
          await page.goto(`http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/`);
          const answers = await page.evaluate(
            async (target: string, body: string) => {
              const tries: RequestInit[] = [
                { headers: { 'content-type': 'application/json' } }, // asks first: a preflight
                { mode: 'no-cors', headers: { 'content-type': 'text/plain' } }, // a simple request: sent as is
              ];
              const seen: string[] = [];
              for (const init of tries) {
                try {
                  const answer = await fetch(target, { method: 'POST', body, ...init });
                  seen.push(`${answer.type} ${answer.status}`);
                } catch (error) {
                  seen.push(`failed: ${(error as Error).name}`);
                }
              }
              return seen;
            },
            `${page_url}api/force-release`,
            JSON.stringify({ name, token: lock.token, reason: 'forged' }),
          );
          // The preflight is refused, so the browser never sends the POST; the simple POST is sent,
          // refused, and its answer is opaque to the page.
          expect(answers).toEqual(['failed: TypeError', 'opaque 0']);
        });
        // Every browser's requests have been answered: a force-release would have removed the grant by now.
        expect((await provider.inspect(name))?.holder?.fencingToken.toString()).toBe(lock.token);
        expect(lock.run.child.exitCode).toBeNull();
      } finally {
        await closePages(pages);
        await provider.close();
        // Chromium keeps sockets open to a host it has seen (some never carry a request): closed here.
        const closed = new Promise<void>((done) => elsewhere.close(() => done()));
        elsewhere.closeAllConnections();
        await closed;
      }
    });
  },
);
