import { nodeTlsOptions, type TlsOptions, tlsOption } from '../../src/tls.js';

/** ioredis's `tls` for the tls option or a rediss:// url (ioredis itself ignores the scheme). */
export function redisTls(
  tls: TlsOptions | boolean | undefined,
  url?: string,
): ReturnType<typeof nodeTlsOptions> | undefined {
  const rediss = url !== undefined && /^rediss:/i.test(url.trim());
  const given = tlsOption(tls ?? rediss);
  return given && nodeTlsOptions(given);
}
