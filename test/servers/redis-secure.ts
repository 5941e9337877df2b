import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestCertificates } from './certs.js';
import { startNative } from './native.js';
import type { ServerGroup } from './types.js';

/** The least-privilege rule of docs/security.md: fencekit's keys and channels, its commands only. */
export const FENCEKIT_ACL_RULE = [
  'resetkeys ~fencekit:* resetchannels &fencekit:* -@all',
  // What the client sends: scripts, hand-over notices, list(), ioredis's ready check, close().
  '+evalsha +eval +subscribe +unsubscribe +scan +info +ping +quit',
  // What the scripts call.
  '+get +set +del +exists +incr +pexpire +pttl +time +publish',
  '+hget +hmget +hset +hdel +hgetall +lindex +lrange +lrem +rpush',
  '+zadd +zcard +zcount +zrange +zrangebyscore +zrem +zremrangebyscore +zscore',
].join(' ');

/**
 * Redis instances that require TLS (no plain port) and credentials: the default user is off; the
 * user `fencekit` has FENCEKIT_ACL_RULE with `password`, and `admin` everything.
 */
export async function startSecureRedis(
  certs: TestCertificates,
  options: { instances?: 1 | 3; password: string; adminPassword: string; clientCertificates?: boolean },
): Promise<ServerGroup> {
  const aclFile = join(certs.dir, `redis-${crypto.randomUUID()}.acl`);
  await writeFile(
    aclFile,
    [
      'user default off',
      `user fencekit on >${options.password} ${FENCEKIT_ACL_RULE}`,
      `user admin on >${options.adminPassword} ~* &* +@all`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return startNative('redis', [String(options.instances ?? 1)], {
    REDIS_TLS_DIR: certs.dir,
    REDIS_ACL_FILE: aclFile,
    REDIS_TLS_AUTH_CLIENTS: options.clientCertificates ? 'yes' : 'no',
  });
}
