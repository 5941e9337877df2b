#!/usr/bin/env bash
# usage: certs.sh DIR
# Makes a throwaway certificate authority and certificates in DIR (PEM, keys mode 600), for test
# servers that require TLS on loopback:
#   ca.pem ca-key.pem                    the authority the tests trust
#   server.pem server-key.pem            made out for 127.0.0.1, ::1 and localhost (serverAuth + clientAuth,
#                                        so a cluster's members can use it towards each other)
#   client.pem client-key.pem            CN=fencekit, for mutual TLS (clientAuth)
#   other-host.pem other-host-key.pem    made out for other.invalid only: a name check must refuse it
#   untrusted-ca.pem untrusted-client.pem untrusted-client-key.pem
#                                        an authority nobody trusts, and a client certificate it signed
set -euo pipefail
dir=${1:?usage: certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
days=2
ossl() { openssl "$@" 2>/dev/null; }

authority() { # NAME CN
  ossl req -x509 -newkey rsa:2048 -nodes -keyout "$1-key.pem" -out "$1.pem" -days "$days" \
    -subj "/CN=$2" -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
# leaf NAME CN CA SAN EKU
leaf() {
  ossl req -newkey rsa:2048 -nodes -keyout "$1-key.pem" -out "$1.csr" -subj "/CN=$2"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s\n' \
    "$5" "${4:+subjectAltName=$4}" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3-key.pem" -CAcreateserial -out "$1.pem" \
    -days "$days" -extfile "$1.ext"
  rm -f "$1.csr" "$1.ext"
}

authority ca 'fencekit test CA'
leaf server localhost ca 'IP:127.0.0.1,IP:::1,DNS:localhost' 'serverAuth,clientAuth'
leaf client fencekit ca '' 'clientAuth'
leaf other-host other.invalid ca 'DNS:other.invalid' 'serverAuth,clientAuth'
authority untrusted-ca 'an authority nobody trusts'
leaf untrusted-client fencekit untrusted-ca '' 'clientAuth'
rm -f ./*.srl
chmod 600 ./*-key.pem
# Servers that drop privileges (PostgreSQL runs as postgres) read their copies from their own state dir.
chmod 755 .
echo "CERTS_DIR=$(pwd)"
