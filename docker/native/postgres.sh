#!/usr/bin/env bash
# usage: [PG_MAX_CONNECTIONS=n] postgres.sh
# Creates and starts a throwaway PostgreSQL cluster (initdb in a temporary directory, not the
# system cluster) on a free 127.0.0.1 port with trust authentication, and prints its URL as
# KEY=value lines. Stop it with: stop.sh "$STATE_DIR".
source "$(dirname "$0")/lib.sh"
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -x "$bin/initdb" ] || { echo "postgres.sh: PostgreSQL not installed (apt-get install postgresql)" >&2; exit 1; }
dir=$(new_state_dir postgres)
stop_on_failure "$dir"
read -r port <<<"$(free_ports 1)"
# initdb refuses to run as root: run the server as the postgres user, in a directory it owns.
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres "$dir"
  as_owner=(runuser -u postgres --)
fi
"${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale C >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }
# fsync off and, unless PG_SYNCHRONOUS_COMMIT=on, no durable commit: a test cluster is thrown
# away, speed matters more. A SIGKILL of the server loses nothing the OS was given (fsync guards
# against a machine crash only); a commit acknowledged before its WAL left the server's memory is
# lost, so a test that kills the server and counts on its commits asks for synchronous commit.
cmd=("${as_owner[@]}" "$bin/postgres" -D "$dir/data" -p "$port" -k "$dir"
  -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit="${PG_SYNCHRONOUS_COMMIT:-off}"
  -c full_page_writes=off -c max_connections="${PG_MAX_CONNECTIONS:-200}")
# What postgres-restart.sh starts again.
printf '%s\0' "${cmd[@]}" >"$dir/pg.cmd"
echo "$port" >"$dir/pg.port"
start_bg "$dir" pg "${cmd[@]}"
ready() { "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; }
wait_until "postgres" "$dir/pg.log" ready
echo "STATE_DIR=$dir"
echo "PG_URL=postgres://postgres@127.0.0.1:$port/postgres"
echo "SERVER_0=pg 127.0.0.1:$port $(cat "$dir/pg.pid")"
