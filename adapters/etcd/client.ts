import { ConsecutiveBreaker, circuitBreaker, handleWhen, retry } from 'cockatiel';
import { Etcd3, type IOptions, isRecoverableError } from 'etcd3';
import type { ConnectionSpec } from '../../src/connection-url.js';
import type { TlsOptions } from '../../src/tls.js';
import { refusedOr } from './refusal.js';
import { etcdTls } from './tls.js';

/** What an etcd3 client is opened with: by the lock provider, and by the idempotency store. */
export interface EtcdClientOptions {
  /** Endpoints, e.g. ['http://10.0.0.1:2379', 'http://10.0.0.2:2379']. */
  endpoints: string[];
  auth?: { username: string; password: string };
  /** TLS towards etcd (https:// endpoints), as the provider's option of the same name. */
  tls?: TlsOptions | boolean;
  /** The etcd3 client's own TLS form, taken as it is when given. */
  credentials?: IOptions['credentials'];
  /** Anything else for the etcd3 client (grpcOptions …). fencekit sets its own faultHandling. */
  clientOptions?: Partial<IOptions>;
}

/** An etcd3 client with fencekit's TLS, auth and fault handling (see faultHandling). */
export function etcdClient(options: EtcdClientOptions): Etcd3 {
  const tls = etcdTls(options.tls);
  return new Etcd3({
    ...options.clientOptions,
    hosts: options.endpoints,
    ...(options.auth ? { auth: options.auth } : {}),
    ...(tls ? { credentials: tls.credentials } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    ...(tls?.servername
      ? {
          grpcOptions: {
            ...options.clientOptions?.grpcOptions,
            'grpc.ssl_target_name_override': tls.servername,
            'grpc.default_authority': tls.servername,
          },
        }
      : {}),
    faultHandling: faultHandling(options.endpoints.length),
  });
}

/**
 * Ends the etcd3 client's watch stream, locally, after client.close(). etcd3 ends that stream only
 * once etcd answers the cancel of its last watch, and gRPC keeps a connection open while a call on
 * it is active: with etcd not answering at close() (a partition, a paused member), the stream and
 * its socket kept the process alive long after close() resolved. Every watch was cancelled before
 * (the deletion watch, each waiter's), so the watch manager, told the stream ended, finds none to
 * attach again and stops. The manager is the client's private field: absent, nothing to do.
 */
export function endWatchStream(client: Etcd3): void {
  const manager = (client as unknown as { watchManager?: { stream?: { cancel(): void } } }).watchManager;
  manager?.stream?.cancel();
}

/** host:port of each endpoint, comma-separated: errors name where they asked, never who. */
export function endpointHosts(endpoints: string[]): string {
  return endpoints.map((endpoint) => endpoint.replace(/^[a-z]+:\/\//i, '')).join(',');
}

/**
 * What an `etcd://[user:password@]host:port[,host2…][?namespace=…]` URL says about the client:
 * endpoints (https:// when TLS is on), auth, and the namespace (the URL's over `namespace`).
 */
export function urlClientOptions(
  spec: ConnectionSpec,
  options: { tls?: TlsOptions | boolean; namespace?: unknown },
): EtcdClientOptions & { namespace: string } {
  const tls = options.tls !== undefined && options.tls !== false;
  return {
    endpoints: spec.hosts.map(
      (h) => `${tls ? 'https' : 'http'}://${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`,
    ),
    namespace: spec.params.get('namespace') ?? (options.namespace as string | undefined) ?? '',
    ...(spec.username !== undefined
      ? { auth: { username: spec.username, password: spec.password ?? '' } }
      : {}),
    ...(options.tls === undefined ? {} : { tls: options.tls }),
  };
}

/** A client for stores other than locks (the idempotency store), opened as connect() opens one. */
export interface EtcdUrlClient {
  client: Etcd3;
  namespace: string;
  /** An AuthenticationError for a refusal of who we are (see refusal.ts), else the error as it is. */
  refused(error: unknown): unknown;
}

/** Opens the client an `etcd://` URL names (TLS already resolved into options.tls). */
export function openUrlClient(
  spec: ConnectionSpec,
  options: { tls?: TlsOptions | boolean; namespace?: unknown },
): EtcdUrlClient {
  const { namespace, ...clientOptions } = urlClientOptions(spec, options);
  const hosts = endpointHosts(clientOptions.endpoints);
  return {
    client: etcdClient(clientOptions),
    namespace,
    refused: (error) => refusedOr(error, hosts),
  };
}

/**
 * A failed call moves on to another endpoint at once (a dead member must not fail a third of all
 * calls), each endpoint's breaker skips it for 1 s after 3 failures (the package's default, 5 s,
 * would keep refusing a healed single endpoint). Every call carries an absolute deadline, so a retry
 * never outlives it. This retry DOES replay a call whose answer was lost, so every mutating call is
 * made safe under replay: the enqueue Txn adopts its own key (see enqueue), deletes and proclaims
 * are guarded by create revision, a revoke is idempotent, a lease grant carries our own id (its
 * replay is refused as "already exists" and adopted).
 */
function faultHandling(endpointCount: number): IOptions['faultHandling'] {
  const recoverable = handleWhen(isRecoverableError);
  return {
    host: () => circuitBreaker(recoverable, { halfOpenAfter: 1_000, breaker: new ConsecutiveBreaker(3) }),
    global: retry(recoverable, { maxAttempts: Math.max(1, endpointCount - 1) }),
  };
}
