import { describe, expect, it } from 'vitest';
import { MAX_REASON_BYTES, validateForceReleaseOptions, validateListPrefix } from '../../src/admin.js';
import type { InvalidArgumentError } from '../../src/errors.js';
import { MemoryLockProvider } from '../../src/index.js';

/** The argument an InvalidArgumentError names, or a failure when fn does not throw one. */
function refusedArgument(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect((error as InvalidArgumentError).code).toBe('INVALID_ARGUMENT');
    return (error as InvalidArgumentError).argument;
  }
  throw new Error('expected an InvalidArgumentError');
}

describe('forceRelease options', () => {
  it('takes reason, by and fencingToken; by defaults to user@host pid of this process', () => {
    expect(validateForceReleaseOptions({ reason: ' stuck ', by: 'ops@bastion', fencingToken: 7n })).toEqual({
      reason: 'stuck',
      by: 'ops@bastion',
      fencingToken: 7n,
    });
    const { by, fencingToken } = validateForceReleaseOptions({ reason: 'stuck' });
    expect(by).toMatch(new RegExp(`@.+ pid ${process.pid}$`));
    expect(fencingToken).toBeUndefined();
  });

  it('refuses each bad option by name', () => {
    const cases: Array<[unknown, string]> = [
      [undefined, 'options'],
      ['stuck', 'options'],
      [{ reason: 'x', force: true }, 'options'],
      [{}, 'reason'],
      [{ reason: '' }, 'reason'],
      [{ reason: ' \t' }, 'reason'],
      [{ reason: 'x'.repeat(MAX_REASON_BYTES + 1) }, 'reason'],
      [{ reason: 'x', by: '' }, 'by'],
      [{ reason: 'x', by: 42 }, 'by'],
      [{ reason: 'x', fencingToken: 7 }, 'fencingToken'],
      [{ reason: 'x', fencingToken: 0n }, 'fencingToken'],
    ];
    for (const [options, argument] of cases) {
      expect({ options, argument: refusedArgument(() => validateForceReleaseOptions(options)) }).toEqual({
        options,
        argument,
      });
    }
  });
});

describe('list prefix', () => {
  it("accepts '' and any start of a name, refuses non-strings and control characters", () => {
    expect(validateListPrefix(undefined)).toBe('');
    expect(validateListPrefix('jobs/ni')).toBe('jobs/ni');
    expect(refusedArgument(() => validateListPrefix(42))).toBe('prefix');
    expect(refusedArgument(() => validateListPrefix('a\nb'))).toBe('prefix');
  });
});

describe('the force-release audit line', () => {
  it('goes to the logger option (warn, with key, token, reason, by) instead of the warning channel', async () => {
    const lines: Array<{ level: string; fields: Record<string, unknown>; message: string }> = [];
    const at =
      (level: string) =>
      (...args: unknown[]) => {
        const [fields, message] = args as [Record<string, unknown>, string];
        lines.push({ level, fields, message });
      };
    const provider = new MemoryLockProvider({
      logger: { info: at('info'), warn: at('warn'), error: at('error') },
    });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const lock = await provider.acquire('audited');
      await provider.forceRelease('audited', { reason: 'stuck job', by: 'ops@bastion' });
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      const audit = lines.filter((l) => l.fields.event === 'force-release');
      expect(audit).toEqual([
        {
          level: 'warn',
          fields: {
            event: 'force-release',
            key: 'audited',
            fencingToken: `${lock.fencingToken}`,
            reason: 'stuck job',
            by: 'ops@bastion',
          },
          message: expect.stringContaining('stuck job'),
        },
      ]);
      expect(warnings.filter((w) => w.includes('stuck job'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      await provider.close();
    }
  });
});
