/**
 * gRPC reports some TLS refusals without their reason ("No connection established. Last error:
 * null"): a client certificate the server refused, or none given where one is required. One TLS
 * handshake of our own, with the provider's settings, asks the server directly; a certificate
 * refusal there is the reason. An outage answers the probe as it answers gRPC, and stays one.
 */
import tls from 'node:tls';
import type { HostPort } from '../../src/connection-url.js';
import { certificateRefusal } from '../../src/tls.js';

/** HTTP/2's connection preface: a server that let us in answers it; one that did not, with an alert. */
const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

/**
 * Why a TLS connection to the first of these hosts that answers is refused over a certificate,
 * or undefined (accepted, an outage, no answer within timeoutMs).
 */
export async function probeCertificates(
  hosts: readonly HostPort[],
  options: tls.ConnectionOptions,
  timeoutMs: number,
): Promise<string | undefined> {
  const verdicts = await Promise.all(hosts.map((host) => handshake(host, options, timeoutMs)));
  return verdicts.map(certificateRefusal).find((why) => why !== undefined);
}

/** The error a TLS connection to host ends with, or undefined when the server answered us. */
function handshake(host: HostPort, options: tls.ConnectionOptions, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve) => {
    const socket = tls.connect({ ...options, host: host.host, port: host.port, ALPNProtocols: ['h2'] });
    let settled = false;
    const settle = (error?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(error);
    };
    const timer = setTimeout(() => settle(), timeoutMs);
    timer.unref(); // a probe keeps no process alive
    // Under TLS 1.3 the server judges our certificate after its side of the handshake: it answers
    // what we send next, with data or with an alert.
    socket.once('secureConnect', () => socket.write(PREFACE));
    socket.once('data', () => settle());
    socket.once('error', (error) => settle(error));
    socket.once('close', () => settle());
  });
}
