import type { ProviderDefaults } from './provider-base.js';
import type { TlsOptions } from './tls.js';

/*
 * What connect() hands an adapter besides the parsed URL (ConnectionSpec, connection-url.ts). The
 * adapters import it from here, and connect.ts imports the adapters (lazily), so it must not live in
 * connect.ts: each adapter would then import the module that imports it.
 */

/**
 * Options of {@link connect}: defaults for every acquire and telemetry ({@link ProviderDefaults}),
 * and the backend's own options (those of its provider class, e.g. `EtcdProviderOptions`).
 */
export interface ConnectOptions extends ProviderDefaults {
  /**
   * TLS towards the backend (file contents or buffers), field by field over the URL's `tls=1`,
   * `ca=`, `cert=`, `key=`, `servername=` (file names) and `rediss://`; `false` turns TLS off. On
   * PostgreSQL the URL's `sslmode=` and its companions work instead (not both).
   */
  tls?: TlsOptions | boolean;
  /** Backend-specific options passed through to the adapter (TLS, auth, timeouts …). */
  [option: string]: unknown;
}
