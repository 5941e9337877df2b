import { requirePeer } from '../connect.js';
import { parseConnectionUrl } from '../connection-url.js';
import { InvalidArgumentError } from '../errors.js';
import { guardSockets } from '../ioredis-sockets.js';
import { postgresTls } from '../postgres-tls.js';
import { processSecrets } from '../secret-mask.js';
import { nodeTlsOptions, resolveTls, type TlsOptions } from '../tls.js';
import { urlCredentials } from '../url-display.js';
import { MemoryRecords } from './memory-records.js';
import type { RecordBackend } from './records.js';
import { IdempotencyStore, type IdempotencyStoreOptions } from './store.js';

/** Options of {@link createIdempotencyStore}: the store's, and those of its backend. */
export interface CreateIdempotencyStoreOptions extends IdempotencyStoreOptions {
  /** PostgreSQL table (default `fencekit_idempotency`). */
  table?: string;
  /** Key prefix: on Redis (default `fencekit:idem:`), on etcd after the URL's namespace (default `fencekit/idem/`). */
  prefix?: string;
  /** PostgreSQL pool size (default 10). */
  maxConnections?: number;
  /**
   * TLS towards the store, over the URL's (`rediss://`, `tls=1`, `ca=`, `cert=`, `key=`,
   * `servername=`). On PostgreSQL, the URL's `sslmode=` and its companions work instead (not both).
   */
  tls?: TlsOptions | boolean;
}

/**
 * Opens an idempotency store: `postgres://user:pass@host/db`, `redis://[:pass@]host:port[/db]`,
 * `etcd://[user:pass@]host:port[,host2…]`, or `memory://[name]`, as `connect()` reads them. The
 * client package (pg, ioredis, etcd3) is loaded only for its scheme, and a missing one is named.
 */
export async function createIdempotencyStore(
  url: string,
  options: CreateIdempotencyStoreOptions = {},
): Promise<IdempotencyStore> {
  return new IdempotencyStore(await createRecordBackend(url, options), options);
}

/**
 * The records a store for `url` keeps, without the store: to wrap them (metrics, fault injection)
 * and hand them to `new IdempotencyStore(records, options)`. The URLs and options are
 * createIdempotencyStore's; `close()` of the store closes them.
 */
export async function createRecordBackend(
  url: string,
  options: CreateIdempotencyStoreOptions = {},
): Promise<RecordBackend> {
  const spec = parseConnectionUrl(url);
  processSecrets.add(urlCredentials(url));
  const timeout = options.callTimeoutMs ?? 5_000;
  // PostgreSQL reads the option beside the URL's sslmode= (src/postgres-tls.ts).
  const tls = spec.backend === 'postgres' ? undefined : await resolveTls(spec, options.tls);
  let records: RecordBackend;
  switch (spec.backend) {
    case 'memory': {
      records = new MemoryRecords(spec.path);
      break;
    }
    case 'redis': {
      // One token counter key for every record: a Cluster would answer CROSSSLOT (see docs/idempotency.md).
      if (/^rediss?\+cluster:/i.test(url.trim()))
        throw new InvalidArgumentError(
          'url',
          'idempotency stores do not run on a Redis Cluster (redis+cluster://); use redis:// or postgres://',
        );
      await requirePeer('ioredis', 'redis');
      const [{ Redis }, { RedisRecords }] = await Promise.all([
        import('ioredis'),
        import('./redis-records.js'),
      ]);
      const host = spec.hosts[0] as { host: string; port: number };
      const client = guardSockets(
        new Redis({
          host: host.host,
          port: host.port,
          username: spec.username,
          password: spec.password,
          db: spec.path === '' ? 0 : Number(spec.path),
          lazyConnect: true,
          // Fail fast while disconnected, and never replay a script whose answer was lost: the store's
          // deadline and the caller decide what happens next.
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
          maxRetriesPerRequest: 0,
          connectTimeout: timeout,
          ...(tls ? { tls: nodeTlsOptions(tls) } : {}),
        }),
      );
      records = new RedisRecords(client, { prefix: options.prefix });
      break;
    }
    case 'postgres': {
      const { connectionString, ssl } = await postgresTls(spec, options.tls);
      await requirePeer('pg', 'postgres');
      const [pg, { PostgresRecords }] = await Promise.all([import('pg'), import('./postgres-records.js')]);
      const Pool = (pg.default ?? pg).Pool;
      const pool = new Pool({
        connectionString,
        ...(ssl === undefined ? {} : { ssl }),
        max: options.maxConnections ?? 10,
        connectionTimeoutMillis: timeout,
        query_timeout: timeout,
        keepAlive: true,
      });
      records = new PostgresRecords(pool, options.table);
      break;
    }
    case 'etcd': {
      await requirePeer('etcd3', 'etcd');
      const [{ openUrlClient }, { EtcdRecords }] = await Promise.all([
        import('../../adapters/etcd/client.js'),
        import('./etcd-records.js'),
      ]);
      const { client, namespace, refused } = openUrlClient(spec, { tls });
      const prefix = `${namespace}${options.prefix ?? 'fencekit/idem/'}`;
      records = new EtcdRecords(client, { prefix, callTimeoutMs: timeout, refused });
      break;
    }
    default:
      throw new InvalidArgumentError(
        'url',
        `idempotency stores run on postgres://, redis://, etcd:// or memory://, not ${spec.backend}`,
      );
  }
  return records;
}
