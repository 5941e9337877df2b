#!/usr/bin/env bash
# Installs the Debian packages whose servers the test suite starts on free loopback ports
# (etcd, ZooKeeper, Redis, PostgreSQL), Apache Curator for the ZooKeeper benchmark's side-by-side
# rows (bench/curator.mjs), and Chromium and Firefox ESR, the headless browsers the dashboard's
# page is tested in (test/cli/dashboard.test.ts). Does nothing when they are all present.
# The tests start their own throwaway servers; this script never starts or enables a service.
set -euo pipefail

packages=(etcd-server etcd-client zookeeper redis-server libcurator-recipes-java chromium firefox-esr)
# What each package must provide for the harness (see docker/native/*.sh; Curator for the interop
# tests and the ZooKeeper benchmark; Chromium and Firefox for the dashboard's browser tests).
probes=(/usr/bin/etcd /usr/bin/etcdctl /usr/share/java/zookeeper.jar /usr/bin/redis-server
  /usr/share/java/curator-recipes.jar /usr/bin/chromium /usr/bin/firefox-esr)

missing=()
for i in "${!packages[@]}"; do
  [ -e "${probes[$i]}" ] || missing+=("${packages[$i]}")
done
# initdb/pg_ctl live under /usr/lib/postgresql/<version>/bin.
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  missing+=(postgresql)
fi
if ! command -v java >/dev/null; then missing+=(default-jre-headless); fi
# The Curator harness is compiled at run time.
if ! command -v javac >/dev/null; then missing+=(default-jdk-headless); fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-servers: etcd, ZooKeeper, Redis, PostgreSQL, Curator, Chromium and Firefox are installed"
  exit 0
fi

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install-servers: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "install-servers: need root or sudo to run: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "install-servers: no apt-get here; install ${missing[*]} yourself, or run the tests with Docker" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# Package scripts try to start the services; without systemd that fails harmlessly, and the tests
# start their own throwaway servers anyway.
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-servers: done"
