export type ServerKind = 'etcd' | 'zookeeper' | 'redis' | 'postgres';

/** One server process of a group (an etcd member, a ZooKeeper node, a Redis instance). */
export interface ServerMember {
  name: string;
  /** host:port or URL its clients use. */
  address: string;
  pid: number;
  /** Sends signal (default SIGKILL) to the server and waits until it has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** SIGSTOP / SIGCONT: the server freezes with its sockets open (a hung peer). */
  pause(): Promise<void>;
  resume(): Promise<void>;
}

export interface ServerGroup {
  kind: ServerKind;
  /** env: endpoints given by the caller; docker: testcontainers; native: docker/native scripts. */
  origin: 'env' | 'docker' | 'native';
  /** ETCD_ENDPOINTS, ZK_CONNECT, REDIS_URL, REDIS_HOSTS, PG_URL … as the start scripts name them. */
  vars: Map<string, string>;
  /** Empty for servers the tests did not start (env): fault tests need their own. */
  members: ServerMember[];
  /** How long starting took, for the closing notes. */
  startMs: number;
  stop(): Promise<void>;
}
