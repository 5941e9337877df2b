import { nodeTlsOptions, type TlsOptions, validateTlsOptions } from '../../src/tls.js';

/** ioredis's `tls` for the tls option or a rediss:// url (ioredis itself ignores the scheme). */
export function redisTls(
  tls: TlsOptions | boolean | undefined,
  url?: string,
): ReturnType<typeof nodeTlsOptions> | undefined {
  if (tls === false) return undefined;
  if (tls === undefined) return url !== undefined && /^rediss:/i.test(url.trim()) ? {} : undefined;
  if (tls === true) return {};
  validateTlsOptions(tls);
  return nodeTlsOptions(tls);
}
