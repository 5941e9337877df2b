import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DashboardProcesses } from './dashboard-process.js';

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
