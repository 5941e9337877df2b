#!/usr/bin/env bash
# usage: postgres-restart.sh STATE_DIR [DOWN_MS]
# Kills a server postgres.sh started (SIGKILL to its process group: the postmaster and every
# backend, as a crash would), keeps it down DOWN_MS, starts it again on the same data and port,
# and waits until it answers (crash recovery replays the WAL).
source "$(dirname "$0")/lib.sh"
dir=${1:?usage: postgres-restart.sh STATE_DIR [DOWN_MS]}
down_ms=${2:-0}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -s "$dir/pg.cmd" ] || { echo "postgres-restart.sh: $dir was not started by postgres.sh" >&2; exit 2; }
pid=$(cat "$dir/pg.pid")
kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
for _ in $(seq 1 200); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.025
done
sleep "$(awk -v ms="$down_ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
mapfile -d '' cmd <"$dir/pg.cmd"
start_bg "$dir" pg "${cmd[@]}"
port=$(cat "$dir/pg.port")
ready() { "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; }
wait_until "postgres" "$dir/pg.log" ready
