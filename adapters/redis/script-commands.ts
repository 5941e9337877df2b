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

/** The Lua of a recipe's four scripts, all over the same keys. */
export interface RecipeLua {
  acquire: string;
  release: string;
  renew: string;
  inspect: string;
}

/**
 * A recipe's scripts (the semaphore's, the read-write lock's) as commands of one client, named
 * `<prefix>Acquire`, `<prefix>Release`, `<prefix>Renew` and `<prefix>Inspect`. Renew and inspect
 * ask the same of both; acquire and release are the recipe's own.
 */
export class RecipeScripts<InspectAnswer> {
  protected readonly scripts: ScriptCommands;
  readonly #prefix: string;

  constructor(redis: Redis | Cluster, prefix: string, numberOfKeys: number, lua: RecipeLua) {
    this.#prefix = prefix;
    this.scripts = new ScriptCommands(
      redis,
      Object.fromEntries(
        (['acquire', 'release', 'renew', 'inspect'] as const).map((step) => [
          this.command(step),
          { numberOfKeys, lua: lua[step] },
        ]),
      ),
    );
  }

  /** The command's name on the client: fencekitSemAcquire, fencekitRwRenew, … */
  protected command(step: keyof RecipeLua): string {
    return `${this.#prefix}${step[0]?.toUpperCase()}${step.slice(1)}`;
  }

  /**
   * The acquire script's call: ARGV 1 to 4 are both recipes' (ownerToken, ttlMs, owner text, wait
   * '1'/'0'), `rest` the recipe's own.
   */
  protected acquireCall(
    keys: string[],
    a: { ownerToken: string; ttlMs: number; owner: string; wait: boolean },
    rest: Array<string | number>,
  ): Promise<unknown> {
    const args = [a.ownerToken, a.ttlMs, a.owner, a.wait ? '1' : '0', ...rest];
    return this.scripts.run(this.command('acquire'), keys, args);
  }

  /** Extends the grant's lease to ttlMs; false when it is not held any more. */
  async renew(keys: string[], ownerToken: string, ttlMs: number): Promise<boolean> {
    return (await this.scripts.run(this.command('renew'), keys, [ownerToken, ttlMs])) === 1;
  }

  inspect(keys: string[]): Promise<InspectAnswer> {
    return this.scripts.run(this.command('inspect'), keys, []) as Promise<InspectAnswer>;
  }
}
