/**
 * What a lock key or node stores about its holder: `{"fencekit":1,"owner":…,"since":…}`. Values other
 * tools wrote (etcdctl's empty value or proposal, Curator's IP address) read as the owner text.
 */
export interface StoredHolder {
  owner: string | undefined;
  since: Date | undefined;
}

export function encodeHolder(owner: string | undefined, since = new Date()): string {
  return JSON.stringify({ fencekit: 1, owner, since: since.toISOString() });
}

export function decodeHolder(value: Buffer | undefined): StoredHolder {
  const text = value?.toString('utf8') ?? '';
  if (text.startsWith('{"fencekit":1')) {
    try {
      const parsed = JSON.parse(text) as { owner?: unknown; since?: unknown };
      // Another writer's malformed fields read as unknown, never as a wrong type or an Invalid Date.
      return {
        owner: typeof parsed.owner === 'string' ? parsed.owner : undefined,
        since: typeof parsed.since === 'string' ? validDate(new Date(parsed.since)) : undefined,
      };
    } catch {
      // not ours after all: fall through
    }
  }
  return { owner: text === '' ? undefined : text, since: undefined };
}

/** A Date read from a backend, or undefined when it is none (or not a valid one: an Invalid Date). */
export function validDate(value: unknown): Date | undefined {
  return value instanceof Date && !Number.isNaN(value.getTime()) ? value : undefined;
}
