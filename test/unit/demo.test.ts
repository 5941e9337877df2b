import { describe, expect, it } from 'vitest';
import { pauseMemoryClient, runDemo } from '../../src/cli/demo.js';
import { MemoryLockProvider } from '../../src/index.js';
import { MemoryLockServer } from '../../src/testing/index.js';

describe('payment demo', () => {
  it('charges twice without fencing and once with fencing', async () => {
    const server = new MemoryLockServer();
    const lines: string[] = [];
    const [unfenced, fenced] = await runDemo(
      async () => new MemoryLockProvider({ server }),
      pauseMemoryClient,
      (line) => lines.push(line),
      200,
    );
    expect(unfenced).toMatchObject({ charges: 2, rejected: 0 });
    expect(fenced).toMatchObject({ charges: 1, rejected: 1 });
    expect(fenced?.tokens.b).toBeGreaterThan(fenced?.tokens.a ?? 0n);
    const text = lines.join('\n');
    expect(text).toMatch(/DOUBLE CHARGE/);
    expect(text).toMatch(/REJECTED.*fencing token \d+ is lower than \d+/);
    // A's signal fired before B was granted: the early loss signal, even though A ignored it.
    const abortedAt = lines.findIndex((l) => l.includes('A  signal aborted'));
    const bGrantedAt = lines.findIndex((l) => l.includes('B  acquired'));
    expect(abortedAt).toBeGreaterThan(-1);
    expect(abortedAt).toBeLessThan(bGrantedAt);
  });
});
