/**
 * Who may use the dashboard. On a loopback address anyone on this machine may (as with any local
 * tool), and the Host header must name a loopback host, so that a web page elsewhere cannot reach
 * it through DNS rebinding. Anywhere else every request needs the token: `Authorization: Bearer
 * <token>` (scripts), or the cookie the page gets from `/?token=<token>`. Tokens are compared in
 * constant time (their SHA-256 digests), and never appear in a message, a log line or an answer.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

export const COOKIE = 'fencekit_dashboard';

/** Whether `host` (an address or 'localhost') is a loopback one: 127.0.0.0/8, ::1, localhost. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (bare === 'localhost' || bare === '::1') return true;
  if (bare.startsWith('::ffff:')) return isLoopback(bare.slice('::ffff:'.length));
  return isIP(bare) === 4 && bare.startsWith('127.');
}

/** Constant-time equality of a given token with the expected one. */
export function tokenMatches(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** The token a request carries: a Bearer header, else the dashboard's cookie. */
export function requestToken(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  if (header?.startsWith('Bearer ')) return header.slice('Bearer '.length).trim();
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === COOKIE) {
      try {
        return decodeURIComponent(value.join('='));
      } catch {
        return undefined; // a malformed cookie carries no token
      }
    }
  }
  return undefined;
}

/** Whether the Host header names a loopback host (any port): the DNS-rebinding check. */
export function hostIsLoopback(request: IncomingMessage): boolean {
  const host = request.headers.host;
  if (!host) return false;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d+$/, '');
  return isLoopback(name);
}

/**
 * Whether a request that changes state (any method but GET and HEAD) comes from a page of another
 * origin than the dashboard's, by its Origin header: a cross-site request forgery. Browsers send
 * Origin with every such request; scripts and curl send none and pass (auth still applies). The
 * Origin's host and port must be the Host header's; the scheme may be https as well as http, as
 * behind a TLS proxy that keeps the Host header, and a Host without a port has that scheme's port.
 */
export function crossOrigin(request: IncomingMessage): boolean {
  const method = request.method ?? 'GET';
  const origin = request.headers.origin;
  if (method === 'GET' || method === 'HEAD' || origin === undefined) return false;
  const host = request.headers.host;
  if (!host) return true;
  try {
    const from = new URL(origin);
    if (from.protocol !== 'http:' && from.protocol !== 'https:') return true;
    return from.host !== new URL(`${from.protocol}//${host}`).host;
  } catch {
    return true; // "null" (a sandboxed frame, a file) or no URL at all: not the dashboard's page
  }
}
