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
pid=$(cat "$dir/pg.pid")                                   # runuser's, when started as root
postmaster=$(head -n1 "$dir/data/postmaster.pid" 2>/dev/null) # the server's own
kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
# Gone, or a zombie nobody has reaped yet (it holds nothing any more).
gone() { [ -z "$1" ] || [ ! -e "/proc/$1" ] || [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
for _ in $(seq 1 200); do
  gone "$pid" && gone "$postmaster" && break
  sleep 0.025
done
# The new server would take a zombie's pid in postmaster.pid for a live server and refuse to start.
rm -f "$dir/data/postmaster.pid"
sleep "$(awk -v ms="$down_ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
mapfile -d '' cmd <"$dir/pg.cmd"
# start_bg truncates pg.log: keep the crashed run's log beside it.
[ -e "$dir/pg.log" ] && cat "$dir/pg.log" >>"$dir/pg-before-restarts.log"
start_bg "$dir" pg "${cmd[@]}"
port=$(cat "$dir/pg.port")
ready() { "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; }
wait_until "postgres" "$dir/pg.log" ready
