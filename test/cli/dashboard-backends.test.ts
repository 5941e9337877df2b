import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TimelineEntry } from '../../src/cli/dashboard/timeline.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';
import { until } from './cli-process.js';
import { DashboardProcesses } from './dashboard-process.js';

/** GETs url until check passes on its answer; resolves with the answer's JSON. */
async function poll(
  url: string,
  // biome-ignore lint/suspicious/noExplicitAny: the answers' JSON, checked field by field
  check: (status: number, body: any) => boolean,
  ms = 15_000,
  // biome-ignore lint/suspicious/noExplicitAny: the answers' JSON, checked field by field
): Promise<any> {
  const deadline = Date.now() + ms;
  for (;;) {
    const response = await fetch(url);
    const body: unknown = await response.json();
    if (check(response.status, body)) return body;
    if (Date.now() > deadline) throw new Error(`${url}: still ${response.status} ${JSON.stringify(body)}`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

/** Follows GET /api/events as the page does, keeping its `timeline` entries, until close(). */
function followTimeline(pageUrl: string): { entries: TimelineEntry[]; close(): void } {
  const controller = new AbortController();
  const entries: TimelineEntry[] = [];
  const read = async () => {
    const response = await fetch(`${pageUrl}api/events`, { signal: controller.signal });
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      const messages = buffered.split('\n\n');
      buffered = messages.pop() ?? '';
      for (const message of messages) {
        const data = /^data: (.*)$/m.exec(message)?.[1];
        if (/^event: timeline$/m.test(message) && data) entries.push(JSON.parse(data) as TimelineEntry);
      }
    }
  };
  read().catch(() => undefined); // ended by close(), or the dashboard stopped: the checks say what is missing
  return { entries, close: () => controller.abort() };
}

// ZooKeeper and PostgreSQL against the dashboard as an operator runs it: the CLI serves the API,
// the holder is another CLI process, and both use a real server. No browser: the page reads the
// same API, and is driven in browsers on Redis and etcd (dashboard.test.ts).
describe.each(['zookeeper', 'postgres'] as const)('fencekit dashboard on %s, over its API', (backend) => {
  let servers: ServerGroup;
  let url = '';
  const processes = new DashboardProcesses();

  beforeAll(async () => {
    servers = await startServers(backend);
    url = backend === 'zookeeper' ? `zk://${endpoint(servers, 'ZK_CONNECT')}` : endpoint(servers, 'PG_URL');
  }, 120_000);
  afterEach(async () => {
    await processes.stop();
  });
  afterAll(async () => {
    await servers?.stop();
  });

  it("a lock another process holds, with its fencing token; its release on the event stream and in the name's timeline; 404 JSON for an unknown name", async () => {
    const prefix = `dash-${backend}-${process.pid}/`;
    const name = `${prefix}orders`;
    const { url: pageUrl } = await processes.dashboard(['--url', url, '--prefix', prefix]);
    // Its first look has ended: the grant below is seen by a later one, so it is in the timeline.
    await poll(`${pageUrl}api/names`, (status) => status === 200);
    const timeline = followTimeline(pageUrl);
    try {
      const lock = await processes.holder(['lock', name, '--url', url, '--owner', 'alice']);
      const listed = await poll(
        `${pageUrl}api/names`,
        (status, body) => status === 200 && body.names.some((row: { name: string }) => row.name === name),
      );
      // No per-lock expiry on either backend: a lock lives with its session or connection.
      expect(listed.names).toMatchObject([
        { name, kind: 'lock', waiters: 0, holders: [{ owner: 'alice', token: lock.token, expiresAt: null }] },
      ]);
      expect(listed.names[0].holders).toHaveLength(1);

      // The holder's command ends: the CLI releases the lock and exits with the command's status.
      process.kill(lock.command, 'SIGTERM');
      expect(await lock.run.exited()).toBe(143);
      const released = (entry: TimelineEntry) =>
        entry.type === 'release' && entry.name === name && entry.token === lock.token;
      await until(`the release of ${name} on /api/events`, () => timeline.entries.some(released));
      const detail = await poll(
        `${pageUrl}api/names/${encodeURIComponent(name)}`,
        (status) => status === 200,
      );
      expect(detail).toMatchObject({ name, kind: 'lock', holders: [] });
      expect(detail.timeline.map((entry: TimelineEntry) => [entry.type, entry.token])).toEqual([
        ['grant', lock.token],
        ['release', lock.token],
      ]);
      expect(detail.history.grants.map((grant: { token: string }) => grant.token)).toEqual([lock.token]);
      await poll(`${pageUrl}api/names`, (status, body) => status === 200 && body.names.length === 0);

      const unknown = await fetch(`${pageUrl}api/names/${encodeURIComponent(`${prefix}no/such/name`)}`);
      expect(unknown.status).toBe(404);
      expect(unknown.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await unknown.json()).toEqual({ error: 'no such name', name: `${prefix}no/such/name` });
    } finally {
      timeline.close();
    }
  }, 60_000);
});

// `fencekit dashboard` over its JSON API only (no browser): what does not depend on the page.
describe('fencekit dashboard refuses to start', () => {
  const processes = new DashboardProcesses();
  afterEach(async () => {
    await processes.stop();
  });

  it('on a non-loopback address without a token, and on a port in use (exit 64)', async () => {
    const { code, stderr } = await processes.cli.run(
      ['dashboard', '--url', 'memory://', '--host', '0.0.0.0'],
      {
        env: { FENCEKIT_DASHBOARD_TOKEN: '' },
      },
    );
    expect(code).toBe(64);
    expect(stderr).toMatch(/--host.*0\.0\.0\.0 is not a loopback address.*--auth-token/);
    const taken = createServer();
    await new Promise<void>((listening) => taken.listen(0, '127.0.0.1', listening));
    try {
      const { port } = taken.address() as { port: number };
      const refused = await processes.cli.run(['dashboard', '--url', 'memory://', '--port', String(port)]);
      expect(refused.code).toBe(64);
      expect(refused.stderr).toMatch(/--port.*is in use/);
    } finally {
      await new Promise<void>((closed) => taken.close(() => closed()));
    }
  });
});
