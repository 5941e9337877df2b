/**
 * Connection URLs with passwords, well-formed and malformed, for every scheme, and a check that a
 * text shows none of the password's forms: as written, %-encoded, %-decoded, or a part of it.
 */

export interface SecretUrl {
  /** What the row tries. */
  name: string;
  url: string;
  /** The password as the user meant it (decoded); its other spellings are derived. */
  secret: string;
  /** Whether createIdempotencyStore() takes this scheme (postgres, redis, memory). */
  store?: boolean;
}

const P = 'Qx7Fence';
const Q = 'Kz9Vault';
const S = `${P}${Q}`;
// Every port is 1 on 127.0.0.1: nothing listens, so the connection errors go through the check too.
const H = '127.0.0.1:1';

export const SECRET_URLS: SecretUrl[] = [
  // Well-formed: connect() opens a provider, its first call fails with BACKEND_UNAVAILABLE.
  { name: 'etcd', url: `etcd://root:${S}@${H}`, secret: S },
  { name: 'etcd, two hosts', url: `etcd://root:${S}@${H},127.0.0.1:2?namespace=app/`, secret: S },
  { name: 'zk with chroot', url: `zk://app:${S}@${H}/locks`, secret: S },
  { name: 'zookeeper', url: `zookeeper://app:${S}@${H}`, secret: S },
  { name: 'redis, empty user', url: `redis://:${S}@${H}/0`, secret: S, store: true },
  { name: 'redis, user', url: `redis://app:${S}@${H}`, secret: S, store: true },
  { name: 'redis+cluster', url: `redis+cluster://:${S}@${H},127.0.0.1:2`, secret: S, store: true },
  { name: 'redlock', url: `redlock://:${S}@${H},127.0.0.1:2,127.0.0.1:3`, secret: S },
  { name: 'postgres', url: `postgres://app:${S}@${H}/db`, secret: S, store: true },
  { name: 'postgresql, query', url: `postgresql://app:${S}@${H}/db?sslmode=disable`, secret: S, store: true },
  { name: 'postgres, empty user', url: `postgres://:${S}@${H}/db`, secret: S, store: true },
  { name: 'memory with user-info', url: `memory://app:${S}@secrets-test`, secret: S, store: true },
  {
    name: 'postgres, / ? # @ % and a space %-encoded',
    url: `postgres://app:${encodeURIComponent(`${P}/?#@% ${Q}`)}@${H}/db`,
    secret: `${P}/?#@% ${Q}`,
    store: true,
  },
  { name: 'redis, %2F in the password', url: `redis://:${P}%2F${Q}@${H}`, secret: `${P}/${Q}`, store: true },
  { name: 'postgres, unicode', url: `postgres://app:${P}é✓${Q}@${H}/db`, secret: `${P}é✓${Q}`, store: true },
  {
    name: 'postgres, unescaped @',
    url: `postgres://app:${P}@${Q}@${H}/db`,
    secret: `${P}@${Q}`,
    store: true,
  },
  {
    name: 'postgres, unescaped space',
    url: `postgres://app:${P} ${Q}@${H}/db`,
    secret: `${P} ${Q}`,
    store: true,
  },
  {
    name: 'postgres, password equal to the host',
    url: `postgres://app:127.0.0.1@${H}/db`,
    secret: '127.0.0.1',
    store: true,
  },
  // Malformed: refused with INVALID_ARGUMENT.
  { name: 'postgres// (colon missing)', url: `postgres//app:${S}@${H}/db`, secret: S, store: true },
  { name: 'postgres:/ (one slash)', url: `postgres:/app:${S}@${H}/db`, secret: S, store: true },
  { name: 'postgres: (no slashes)', url: `postgres:app:${S}@${H}/db`, secret: S, store: true },
  {
    name: 'postgres, unescaped /',
    url: `postgres://app:${P}/${Q}@${H}/db`,
    secret: `${P}/${Q}`,
    store: true,
  },
  {
    name: 'postgres, unescaped ?',
    url: `postgres://app:${P}?${Q}@${H}/db`,
    secret: `${P}?${Q}`,
    store: true,
  },
  {
    name: 'postgres, unescaped #',
    url: `postgres://app:${P}#${Q}@${H}/db`,
    secret: `${P}#${Q}`,
    store: true,
  },
  {
    name: 'postgres, digits then /',
    url: `postgres://app:31337/${Q}@${H}/db`,
    secret: `31337/${Q}`,
    store: true,
  },
  {
    name: 'postgres, unescaped @ and /',
    url: `postgres://app:${P}@127.0.0.9/${Q}@${H}/db`,
    secret: `${P}@127.0.0.9/${Q}`,
    store: true,
  },
  { name: 'redis, unescaped /', url: `redis://:${P}/${Q}@${H}`, secret: `${P}/${Q}`, store: true },
  { name: 'redis, unescaped ?', url: `redis://:${P}?${Q}@${H}`, secret: `${P}?${Q}`, store: true },
  { name: 'etcd, unescaped /', url: `etcd://root:${P}/${Q}@${H}`, secret: `${P}/${Q}` },
  { name: 'zk, unescaped ?', url: `zk://app:${P}?${Q}@${H}`, secret: `${P}?${Q}` },
  {
    name: 'redlock, unescaped /',
    url: `redlock://:${P}/${Q}@${H},127.0.0.1:2,127.0.0.1:3`,
    secret: `${P}/${Q}`,
  },
  {
    name: 'postgres, malformed %-escape',
    url: `postgres://app:${S}%zz@${H}/db`,
    secret: `${S}%zz`,
    store: true,
  },
  {
    name: 'postgres, port out of range',
    url: `postgres://app:${S}@127.0.0.1:99999/db`,
    secret: S,
    store: true,
  },
  { name: 'postgres, two ports', url: `postgres://app:${S}@${H}:2/db`, secret: S, store: true },
  { name: 'postgres, bad path escape', url: `postgres://app:${S}@${H}/%zz`, secret: S, store: true },
  { name: 'postgres, two hosts', url: `postgres://app:${S}@${H},127.0.0.1:2/db`, secret: S, store: true },
  { name: 'redis, two hosts', url: `redis://:${S}@${H},127.0.0.1:2`, secret: S, store: true },
  { name: 'redis, path not a number', url: `redis://:${S}@${H}/cache`, secret: S, store: true },
  { name: 'redlock, two hosts', url: `redlock://:${S}@${H},127.0.0.1:2`, secret: S },
  { name: 'etcd, no host', url: `etcd://root:${S}@`, secret: S },
  { name: 'memory, name and path', url: `memory://app:${S}@a/b`, secret: S, store: true },
  { name: 'unknown scheme mysql', url: `mysql://app:${S}@${H}/db`, secret: S, store: true },
  { name: 'unknown scheme rediss', url: `rediss://:${S}@${H}`, secret: S, store: true },
  { name: 'the password alone', url: S, secret: S, store: true },
  { name: 'user:password@host, no scheme', url: `app:${S}@${H}`, secret: S, store: true },
];

/** The password as written, %-encoded or %-decoded, and each part of it between / ? # @ % or a space. */
export function secretForms(secret: string): string[] {
  const forms = new Set([secret, encodeURIComponent(secret), encodeURI(secret)]);
  for (const part of secret.split(/[/?#@%\s]+/)) if (part.length >= 5) forms.add(part);
  return [...forms];
}

/** The forms of the secret that the text shows; [] when none. */
export function leaked(text: string, secret: string): string[] {
  return secretForms(secret).filter((form) => text.includes(form));
}
