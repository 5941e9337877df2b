/** host:port[,host:port…][/chroot], as ZooKeeper clients take it. */
export interface ServerList {
  servers: { host: string; port: number }[];
  /** '' or an absolute path without a trailing slash. */
  chroot: string;
}

export function parseConnectString(connectString: string): ServerList {
  const slash = connectString.indexOf('/');
  const hostPart = slash < 0 ? connectString : connectString.slice(0, slash);
  let chroot = slash < 0 ? '' : connectString.slice(slash);
  if (chroot === '/') chroot = '';
  if (chroot !== '' && !/^(\/[^/]+)+$/.test(chroot)) throw new Error(`bad chroot "${chroot}"`);
  const servers = hostPart
    .split(',')
    .filter((s) => s !== '')
    .map((entry) => {
      const m = /^\[([^\]]+)\](?::(\d+))?$|^([^:]+)(?::(\d+))?$/.exec(entry);
      if (!m) throw new Error(`bad server address "${entry}"`);
      const host = (m[1] ?? m[3]) as string;
      const port = Number(m[2] ?? m[4] ?? 2181);
      if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`bad port in "${entry}"`);
      return { host, port };
    });
  if (servers.length === 0) throw new Error(`no server in "${connectString}"`);
  return { servers, chroot };
}

/** A random order, so that clients spread over the ensemble. */
export function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
