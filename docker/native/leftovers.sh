#!/usr/bin/env bash
# usage: leftovers.sh  — fails if a server or state directory started by docker/native is still
# there (run after the tests: every test file must stop what it started).
set -uo pipefail
base=${FENCEKIT_SERVERS_ROOT:-${TMPDIR:-/tmp}}
dirs=$(ls -d "$base"/fencekit-{etcd,zookeeper,redis,postgres}.* 2>/dev/null)
procs=$(pgrep -af "$base/fencekit-(etcd|zookeeper|redis|postgres)\." | grep -v pgrep)
# redis-server rewrites its process title to "redis-server 127.0.0.1:PORT"; 6379 is the system's own.
# FENCEKIT_LEFTOVERS_IGNORE_PIDS: redis-servers that were running before the tests (.ci/run).
redis=$(pgrep -a redis-server | grep -v ':6379' || true)
for pid in ${FENCEKIT_LEFTOVERS_IGNORE_PIDS:-}; do
  redis=$(grep -v "^$pid " <<<"$redis" || true)
done
# With a root of this run's own (.ci/run), only the redis-servers the tests started count: they run
# in this checkout (the tests' working directory); another checkout's or another tool's do not.
# (redis-server overwrites its environment with its title, so FENCEKIT_SERVERS_ROOT cannot tell.)
if [ -n "${FENCEKIT_SERVERS_ROOT:-}" ] && [ -n "$redis" ]; then
  here=$(pwd -P)
  ours=""
  while read -r pid rest; do
    if [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$here" ]; then
      ours="$ours${ours:+$'\n'}$pid $rest"
    fi
  done <<<"$redis"
  redis=$ours
fi
procs="$procs${redis:+$'\n'$redis}"
if [ -n "$dirs$procs" ]; then
  echo "leftovers: test servers were not stopped:" >&2
  # What each directory still holds tells which step failed (a start, a stop, a late restart).
  for dir in $dirs; do
    echo "$dir:" >&2
    find "$dir" -maxdepth 2 -printf '  %p %s bytes %TT\n' >&2
    tail -n 5 "$dir"/*.log 2>/dev/null | sed 's/^/    /' >&2
  done
  [ -n "$procs" ] && echo "$procs" >&2
  exit 1
fi
echo "leftovers: no test server, state directory or data left behind"

