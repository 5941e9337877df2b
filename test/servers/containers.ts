import type { ServerGroup, ServerKind } from './types.js';

// Used only when a Docker engine answers (not on the native-only CI machine). Single servers; the
// clusters come from the native scripts, which need no engine.

let engine: Promise<boolean> | undefined;

/** Whether a container runtime answers (testcontainers' own detection, answered once per process). */
export function dockerAvailable(): Promise<boolean> {
  engine ??= (async () => {
    if (process.env.FENCEKIT_NO_DOCKER) return false;
    try {
      const { getContainerRuntimeClient } = await import('testcontainers');
      await getContainerRuntimeClient();
      return true;
    } catch {
      return false;
    }
  })();
  return engine;
}

const IMAGES: Record<
  ServerKind,
  { image: string; port: number; command?: string[]; env?: Record<string, string> }
> = {
  etcd: {
    image: 'quay.io/coreos/etcd:v3.5.17',
    port: 2379,
    command: [
      'etcd',
      '--listen-client-urls=http://0.0.0.0:2379',
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--heartbeat-interval=10',
      '--election-timeout=100',
    ],
  },
  zookeeper: {
    image: 'zookeeper:3.8',
    port: 2181,
    env: { ZOO_TICK_TIME: '200', ZOO_4LW_COMMANDS_WHITELIST: 'srvr,ruok' },
  },
  redis: { image: 'redis:7', port: 6379, command: ['redis-server', '--save', '', '--appendonly', 'no'] },
  postgres: { image: 'postgres:15', port: 5432, env: { POSTGRES_HOST_AUTH_METHOD: 'trust' } },
};

export async function startContainer(kind: ServerKind): Promise<ServerGroup> {
  const started = performance.now();
  const { GenericContainer, Wait } = await import('testcontainers');
  const spec = IMAGES[kind];
  let builder = new GenericContainer(spec.image).withExposedPorts(spec.port);
  if (spec.command) builder = builder.withCommand(spec.command);
  if (spec.env) builder = builder.withEnvironment(spec.env);
  if (kind === 'postgres')
    builder = builder.withWaitStrategy(Wait.forLogMessage(/ready to accept connections/, 2));
  const container = await builder.start();
  const host = container.getHost() === 'localhost' ? '127.0.0.1' : container.getHost();
  const port = container.getMappedPort(spec.port);
  const vars = new Map<string, string>();
  if (kind === 'etcd') vars.set('ETCD_ENDPOINTS', `http://${host}:${port}`);
  if (kind === 'zookeeper') vars.set('ZK_CONNECT', `${host}:${port}`);
  if (kind === 'redis') {
    vars.set('REDIS_URL', `redis://${host}:${port}`);
    vars.set('REDIS_HOSTS', `${host}:${port}`);
  }
  if (kind === 'postgres') vars.set('PG_URL', `postgres://postgres@${host}:${port}/postgres`);
  return {
    kind,
    origin: 'docker',
    vars,
    members: [],
    startMs: performance.now() - started,
    stop: async () => {
      await container.stop();
    },
  };
}
