import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const script = resolve(import.meta.dirname, '../../docker/native/certs.sh');

/** One certificate and its key: the files, and their PEM contents. */
export interface CertificateFiles {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
}

/** A throwaway authority and certificates from docker/native/certs.sh (see there for each). */
export interface TestCertificates {
  dir: string;
  caFile: string;
  ca: Buffer;
  /** For 127.0.0.1, ::1 and localhost. */
  server: CertificateFiles;
  /** CN=fencekit, for mutual TLS. */
  client: CertificateFiles;
  /** For other.invalid only: a host-name check must refuse it. */
  otherHost: CertificateFiles;
  untrustedCaFile: string;
  /** Signed by an authority nobody trusts. */
  untrustedClient: CertificateFiles;
  /** Deletes the directory. */
  remove(): Promise<void>;
}

/** Makes a fresh authority and certificates (openssl) in a temporary directory. */
export async function makeTestCertificates(): Promise<TestCertificates> {
  const dir = await mkdtemp(join(tmpdir(), 'fencekit-certs-'));
  await run('bash', [script, dir], { timeout: 60_000 });
  const pair = async (name: string): Promise<CertificateFiles> => {
    const certFile = join(dir, `${name}.pem`);
    const keyFile = join(dir, `${name}-key.pem`);
    return { certFile, keyFile, cert: await readFile(certFile), key: await readFile(keyFile) };
  };
  const caFile = join(dir, 'ca.pem');
  return {
    dir,
    caFile,
    ca: await readFile(caFile),
    server: await pair('server'),
    client: await pair('client'),
    otherHost: await pair('other-host'),
    untrustedCaFile: join(dir, 'untrusted-ca.pem'),
    untrustedClient: await pair('untrusted-client'),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
