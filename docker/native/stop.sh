#!/usr/bin/env bash
# usage: stop.sh STATE_DIR  — kills the servers whose PIDs the start script recorded there (and only
# those), waits until they are gone, and deletes the directory with their data and logs.
set -uo pipefail
dir=${1:?usage: stop.sh STATE_DIR}
case "$(basename "$dir")" in
fencekit-*) ;;
*) echo "stop.sh: $dir is not a fencekit state directory" >&2; exit 2 ;;
esac
[ -d "$dir" ] || exit 0
# Kills every server a pid file names and waits (up to 5 s) until they are gone.
kill_recorded() {
  local pids=() pidfile pid alive
  for pidfile in "$dir"/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(head -n1 "$pidfile" 2>/dev/null)
    [ -n "$pid" ] || continue
    # SIGKILL: after losing quorum etcd takes seconds on SIGTERM, and test data is thrown away anyway.
    # The whole process group, so a server's own children (PostgreSQL backends) go too.
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    pids+=("$pid")
  done
  for _ in $(seq 1 100); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && return 0
    sleep 0.05
  done
}
# rm -rf fails ("Directory not empty") when something still writes into the directory: a server
# restarted by a test just as it stopped writes a new pid file and log. Kill again and retry.
for attempt in $(seq 1 20); do
  kill_recorded
  rm -rf "$dir" 2>/dev/null
  [ -d "$dir" ] || exit 0
  sleep 0.25
done
echo "stop.sh: could not delete $dir; what is left:" >&2
find "$dir" -maxdepth 2 >&2
exit 1
