import type { Cluster, Redis } from 'ioredis';

type Call = (...args: Array<string | number>) => Promise<unknown>;

/** A Lua script and how many of its arguments are keys. */
export interface ScriptDefinition {
  lua: string;
  numberOfKeys: number;
}

/**
 * Lua scripts as commands of one client (EVALSHA, loaded on first use). A name already defined on
 * the client is kept: every recipe object over one client shares the definitions.
 */
export class ScriptCommands {
  readonly #redis: Redis | Cluster;
  readonly #commands: Record<string, Call>;

  constructor(redis: Redis | Cluster, scripts: Record<string, ScriptDefinition>) {
    this.#redis = redis;
    const commands = redis as unknown as Record<string, Call | undefined>;
    for (const [name, script] of Object.entries(scripts))
      if (!commands[name]) redis.defineCommand(name, script);
    this.#commands = commands as Record<string, Call>;
  }

  run(name: string, keys: string[], args: Array<string | number>): Promise<unknown> {
    return (this.#commands[name] as Call).apply(this.#redis, [...keys, ...args]);
  }
}
