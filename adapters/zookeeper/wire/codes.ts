/**
 * ZooKeeper's error codes (the Java server's KeeperException.Code), under the names the adapter
 * (and node-zookeeper-client) use. The C client's own -9 and -15 never come from a server, so they
 * are not named: a server that sends them gets UNKNOWN_-9, UNKNOWN_-15.
 */
const NAMES: Record<number, string> = {
  0: 'OK',
  [-1]: 'SYSTEM_ERROR',
  [-2]: 'RUNTIME_INCONSISTENCY',
  [-3]: 'DATA_INCONSISTENCY',
  [-4]: 'CONNECTION_LOSS',
  [-5]: 'MARSHALLING_ERROR',
  [-6]: 'UNIMPLEMENTED',
  [-7]: 'OPERATION_TIMEOUT',
  [-8]: 'BAD_ARGUMENTS',
  [-12]: 'UNKNOWN_SESSION',
  [-13]: 'NEW_CONFIG_NO_QUORUM',
  [-14]: 'RECONFIG_IN_PROGRESS',
  [-100]: 'API_ERROR',
  [-101]: 'NO_NODE',
  [-102]: 'NO_AUTH',
  [-103]: 'BAD_VERSION',
  [-108]: 'NO_CHILDREN_FOR_EPHEMERALS',
  [-110]: 'NODE_EXISTS',
  [-111]: 'NOT_EMPTY',
  [-112]: 'SESSION_EXPIRED',
  [-113]: 'INVALID_CALLBACK',
  [-114]: 'INVALID_ACL',
  [-115]: 'AUTH_FAILED',
  [-118]: 'SESSION_MOVED',
  [-119]: 'NOT_READ_ONLY',
  [-120]: 'EPHEMERAL_ON_LOCAL_SESSION',
  [-121]: 'NO_WATCHER',
  [-122]: 'REQUEST_TIMEOUT',
  [-123]: 'RECONFIG_DISABLED',
  [-124]: 'SESSION_CLOSED_REQUIRE_SASL_AUTH',
  [-125]: 'QUOTA_EXCEEDED',
  [-127]: 'THROTTLED_OP',
};

export const Code = {
  OK: 0,
  CONNECTION_LOSS: -4,
  UNIMPLEMENTED: -6,
  OPERATION_TIMEOUT: -7,
  NO_NODE: -101,
  SESSION_EXPIRED: -112,
  AUTH_FAILED: -115,
} as const;

/** A code the table does not know is named, never thrown about: newer servers add codes. */
export function codeName(code: number): string {
  return NAMES[code] ?? `UNKNOWN_${code}`;
}

/** An error the server (or the loss of the connection) gave a call. `name` is the code's name. */
export class ZkError extends Error {
  override readonly name: string;
  constructor(
    readonly code: number,
    readonly path?: string,
    readonly detail?: string,
    options?: { cause?: unknown },
  ) {
    super(
      `${codeName(code)}${path !== undefined ? ` (${path})` : ''}${detail ? `: ${detail}` : ''}`,
      options,
    );
    this.name = codeName(code);
  }
}

/** A ZooKeeper error code name ('NO_NODE', 'NODE_EXISTS', 'CONNECTION_LOSS' …), or undefined. */
export function zkCode(error: unknown): string | undefined {
  return error instanceof ZkError ? error.name : undefined;
}
