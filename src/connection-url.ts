/**
 * Connection URLs taken apart: one grammar for connect(), the idempotency stores and the CLI.
 */
import { isIPv6 } from 'node:net';
import { InvalidArgumentError } from './errors.js';
import type { BackendName } from './types.js';
import { CONTROL_CHARS } from './validate.js';

/** One host of a connection URL, with its port (the backend's default when the URL has none). */
export interface HostPort {
  /** A name or an IP address (IPv6 without brackets). */
  host: string;
  /** The port: the URL's, or the backend's default. */
  port: number;
}

/** A connection URL taken apart; what each adapter's factory receives. */
export interface ConnectionSpec {
  backend: BackendName;
  url: string;
  hosts: HostPort[];
  username: string | undefined;
  password: string | undefined;
  /** The path without its leading '/': Redis db number, PostgreSQL database, ZooKeeper chroot, memory name. */
  path: string;
  params: URLSearchParams;
}

const DEFAULT_PORTS: Record<Exclude<BackendName, 'memory'>, number> = {
  etcd: 2379,
  zookeeper: 2181,
  redis: 6379,
  redlock: 6379,
  postgres: 5432,
};

const SCHEMES: Record<string, BackendName> = {
  memory: 'memory',
  etcd: 'etcd',
  zk: 'zookeeper',
  zookeeper: 'zookeeper',
  redis: 'redis',
  'redis+cluster': 'redis',
  rediss: 'redis',
  'rediss+cluster': 'redis',
  redlock: 'redlock',
  postgres: 'postgres',
  postgresql: 'postgres',
};

// The user-info runs to the last '@' before the path, as WHATWG URL (and so pg) reads it.
const URL_SHAPE = /^([a-z][a-z0-9+.-]*):\/\/(?:([^/?#]*)@)?([^/?#@]*)(\/[^?#]*)?(?:\?([^#]*))?$/i;
/** The form every "not a URL" error names; an error never quotes the URL (or any part of it). */
const URL_FORM = 'scheme://host[:port][/path][?query] (user:password@ may precede the host)';

/**
 * Takes a connection URL apart. Unlike WHATWG URL it accepts several comma-separated hosts
 * (`etcd://h1:2379,h2:2379`). Every error says what is wrong with which part, without quoting it:
 * in a malformed URL any part may hold the password (src/url-display.ts shows URLs).
 */
export function parseConnectionUrl(url: string): ConnectionSpec {
  if (typeof url !== 'string' || url.trim() === '')
    throw new InvalidArgumentError('url', 'must be a non-empty string');
  // A control character (a raw tab or line end) is something WHATWG URL deletes, so a client that
  // parses the URL that way (pg does) would read another URL than this one: `ssl\tmode=` would be
  // its sslmode= while we saw none. Refused, never quoted; %-encode it where one is meant.
  if (CONTROL_CHARS.test(url.trim()))
    throw new InvalidArgumentError(
      'url',
      'contains a control character (a raw tab or line end): %-encode it',
    );
  const match = URL_SHAPE.exec(url.trim());
  if (!match)
    throw new InvalidArgumentError('url', `the URL is not of the form ${URL_FORM}${escapeHint(url)}`);
  const [, rawScheme = '', userinfo, hostList = '', rawPath = '', query = ''] = match;
  // An '@' after the host list: most likely a password with an unescaped / or ? ended the host
  // list early (postgres://u:12345/x@db would connect to host u, port 12345; postgres://u:a@b/c@db
  // to host b, a part of the password).
  if (/@/.test(`${rawPath}${query}`))
    throw new InvalidArgumentError(
      'url',
      `it has an '@' after the host list${escapeHint(url)}; so must an '@' in the path or query`,
    );
  const scheme = rawScheme.toLowerCase();
  const backend = SCHEMES[scheme];
  if (!backend) {
    throw new InvalidArgumentError(
      'url',
      `unknown scheme "${scheme}://"; use one of ${Object.keys(SCHEMES)
        .map((s) => `${s}://`)
        .join(', ')}`,
    );
  }
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    username = decode(colon < 0 ? userinfo : userinfo.slice(0, colon), 'user name') || undefined;
    password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1), 'password');
  }
  const path = decode(rawPath.replace(/^\//, ''), 'path');
  const spec: ConnectionSpec = {
    backend,
    url,
    hosts: [],
    username,
    password,
    path,
    params: new URLSearchParams(query),
  };
  if (backend === 'memory') {
    if (hostList !== '' && path !== '')
      throw new InvalidArgumentError('url', 'memory:// takes one name: memory://name');
    spec.path = hostList || path;
    return spec;
  }
  if (hostList === '') throw new InvalidArgumentError('url', `${scheme}:// needs at least one host`);
  spec.hosts = hostList.split(',').map((entry, index) => parseHostPort(entry, index, DEFAULT_PORTS[backend]));
  if (backend === 'redlock' && spec.hosts.length < 3) {
    throw new InvalidArgumentError(
      'url',
      `redlock:// needs at least 3 independent hosts, got ${spec.hosts.length}`,
    );
  }
  if ((scheme === 'redis+cluster' || scheme === 'rediss+cluster') && path !== '') {
    throw new InvalidArgumentError('url', 'redis+cluster:// takes no database number (a Cluster has only 0)');
  }
  if ((scheme === 'redis' || scheme === 'rediss') && spec.hosts.length !== 1) {
    throw new InvalidArgumentError(
      'url',
      'redis:// takes one host; use redlock:// for several independent instances, redis+cluster:// for a Redis Cluster',
    );
  }
  if (backend === 'redis' && path !== '' && !/^\d+$/.test(path)) {
    throw new InvalidArgumentError('url', 'redis:// path must be a database number');
  }
  if (backend === 'postgres' && spec.hosts.length !== 1) {
    throw new InvalidArgumentError('url', 'postgres:// takes one host');
  }
  return spec;
}

function parseHostPort(entry: string, index: number, defaultPort: number): HostPort {
  // A host name or an IP address; an IPv6 address in brackets. '@' never: it ends the user-info.
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]\s@/?#<>^|\\]+)(?::(\d{1,5}))?$/i.exec(entry);
  if (!m || m[1] === undefined)
    throw new InvalidArgumentError('url', `host ${index + 1} of the URL is not a host or host:port`);
  // WHATWG URL (and so pg) refuses a bracketed address that is not IPv6.
  if (m[1].startsWith('[') && !isIPv6(m[1].slice(1, -1)))
    throw new InvalidArgumentError('url', `host ${index + 1} of the URL is not an IPv6 address`);
  const port = m[2] === undefined ? defaultPort : Number(m[2]);
  if (port < 1 || port > 65535)
    throw new InvalidArgumentError('url', `the port of host ${index + 1} is out of range (1-65535)`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port };
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new InvalidArgumentError('url', `the ${what} has a malformed %-escape`);
  }
}

/** Where a password is the likely culprit, says how to write it. */
function escapeHint(url: string): string {
  return url.includes('@')
    ? '; a / ? # @ or % in the user name or password must be %-encoded (/ as %2F, ? as %3F, # as %23, @ as %40, % as %25)'
    : '';
}
