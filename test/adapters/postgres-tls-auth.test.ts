import { describe, expect, it } from 'vitest';
import { connect, type FencekitError } from '../../src/index.js';
import { authenticationError } from '../../src/postgres-refusal.js';
import { postgresFixture } from '../servers/postgres-fixture.js';

// Classification; a server that requires TLS and a password is in postgres-tls-secure.test.ts.
describe('postgres: refused credentials and certificates', () => {
  it.each(['28P01', '28000', '42501', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'ERR_TLS_CERT_ALTNAME_INVALID'])(
    '%s is AUTH_FAILED and names no secret',
    (code) => {
      const error = Object.assign(new Error('password "s3cret" rejected'), { code });
      const refused = authenticationError(error, '127.0.0.1:5432');
      expect(refused?.code).toBe('AUTH_FAILED');
      expect(refused?.message).not.toContain('s3cret');
    },
  );
  it('a server without TLS is AUTH_FAILED (configuration, not outage)', () => {
    expect(authenticationError(new Error('The server does not support SSL connections'), 'h:1')?.code).toBe(
      'AUTH_FAILED',
    );
  });
  it('an outage is not classified', () => {
    expect(
      authenticationError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'h:1'),
    ).toBeUndefined();
    expect(
      authenticationError(Object.assign(new Error('terminating'), { code: '57P01' }), 'h:1'),
    ).toBeUndefined();
  });
});

describe('postgres: a role without grants (real server)', () => {
  const fx = postgresFixture();
  it('TLS asked of a server without it is AUTH_FAILED at once, in either form', async () => {
    for (const url of [`${fx.url}?sslmode=require`, `${fx.url}?tls=1`]) {
      const provider = await connect(url);
      try {
        const error = await provider.acquire('k', { waitMs: 120_000 }).catch((e: unknown) => e);
        expect((error as FencekitError).code).toBe('AUTH_FAILED');
        expect((error as FencekitError).message).toMatch(/TLS required but the server does not offer it/);
      } finally {
        await provider.close();
      }
    }
  });
  it('is refused with AUTH_FAILED at once, not retried for waitMs', async () => {
    const role = `fk_nogrants_${process.pid}`;
    await fx.admin.query(`CREATE ROLE ${role} LOGIN`);
    // PUBLIC may create in public on PostgreSQL < 15: the role must not (given back below).
    await fx.admin.query('REVOKE CREATE ON SCHEMA public FROM PUBLIC');
    try {
      const url = new URL(fx.url);
      url.username = role;
      const provider = fx.open({ connectionString: url.toString() });
      const started = Date.now();
      const error = await provider.acquire('k', { waitMs: 60_000 }).catch((e: unknown) => e);
      expect((error as { code?: string }).code).toBe('AUTH_FAILED');
      expect(Date.now() - started).toBeLessThan(30_000);
    } finally {
      await fx.admin.query('GRANT CREATE ON SCHEMA public TO PUBLIC');
    }
  });
});
