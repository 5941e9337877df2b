#!/usr/bin/env bash
# usage: [PG_MAX_CONNECTIONS=n] [PG_TLS_DIR=dir [PG_PASSWORD_AUTH=password] [PG_CERT_USER=role [PG_CERT_CN=cn]]] postgres.sh
# Creates and starts a throwaway PostgreSQL cluster (initdb in a temporary directory, not the
# system cluster) on a free 127.0.0.1 port with trust authentication, and prints its URL as
# KEY=value lines. Stop it with: stop.sh "$STATE_DIR".
#
# PG_TLS_DIR (a directory certs.sh made): TLS only instead. TCP connections must be hostssl and
# authenticate (scram-sha-256; no plain host line), trust stays on the Unix socket in STATE_DIR
# for the admin (PG_ADMIN_URL). PG_PASSWORD_AUTH: the role `fencekit` with that password and the
# least privilege of docs/security.md. PG_CERT_USER: a role that logs in with a client certificate
# (its CN, PG_CERT_CN, defaults to the role's name) and no password, with the same grants.
source "$(dirname "$0")/lib.sh"
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -x "$bin/initdb" ] || { echo "postgres.sh: PostgreSQL not installed (apt-get install postgresql)" >&2; exit 1; }
dir=$(new_state_dir postgres)
stop_on_failure "$dir"
# initdb refuses to run as root: run the server as the postgres user, in a directory it owns.
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres "$dir"
  as_owner=(runuser -u postgres --)
fi
"${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale C >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }
tls=()
if [ -n "${PG_TLS_DIR:-}" ]; then
  # The server reads its key only when the server's user owns it with mode 600: its own copies.
  mkdir "$dir/tls"
  cp "$PG_TLS_DIR/server.pem" "$PG_TLS_DIR/server-key.pem" "$PG_TLS_DIR/ca.pem" "$dir/tls/"
  chmod 600 "$dir/tls/server-key.pem"
  tls=(-c ssl=on -c "ssl_cert_file=$dir/tls/server.pem" -c "ssl_key_file=$dir/tls/server-key.pem"
    -c "ssl_ca_file=$dir/tls/ca.pem" -c password_encryption=scram-sha-256)
  cert_user=${PG_CERT_USER:-}
  {
    echo 'local all all trust'
    if [ -n "$cert_user" ]; then
      echo "hostssl all $cert_user 127.0.0.1/32 cert map=client_certs"
      echo "client_certs ${PG_CERT_CN:-$cert_user} $cert_user" >"$dir/data/pg_ident.conf"
    fi
    echo 'hostssl all all 127.0.0.1/32 scram-sha-256'
  } >"$dir/data/pg_hba.conf"
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres "$dir/tls" "$dir/data"; fi
fi
# fsync off and, unless PG_SYNCHRONOUS_COMMIT=on, no durable commit: a test cluster is thrown
# away, speed matters more. A SIGKILL of the server loses nothing the OS was given (fsync guards
# against a machine crash only); a commit acknowledged before its WAL left the server's memory is
# lost, so a test that kills the server and counts on its commits asks for synchronous commit.
# A free port can be taken by another process before the server binds it (tests start servers
# side by side): the server then exits at once, and the start is tried again on another port.
for attempt in 1 2 3; do
  read -r port <<<"$(free_ports 1)"
  cmd=("${as_owner[@]}" "$bin/postgres" -D "$dir/data" -p "$port" -k "$dir"
    -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit="${PG_SYNCHRONOUS_COMMIT:-off}"
    -c full_page_writes=off -c max_connections="${PG_MAX_CONNECTIONS:-200}" "${tls[@]}")
  # What postgres-restart.sh starts again.
  printf '%s\0' "${cmd[@]}" >"$dir/pg.cmd"
  echo "$port" >"$dir/pg.port"
  start_bg "$dir" pg "${cmd[@]}"
  ready() { "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; }
  if WAIT_PID=$(cat "$dir/pg.pid") wait_until "postgres" "$dir/pg.log" ready; then break; fi
  if ((attempt < 3)) && grep -q 'Address already in use' "$dir/pg.log"; then
    echo "postgres.sh: port $port was taken before the server bound it; trying another" >&2
    continue
  fi
  exit 1
done
if [ -n "${PG_TLS_DIR:-}" ]; then
  admin() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres "$@"; }
  # What fencekit needs: to connect, and to create its tables in a schema of its own (found
  # through the role's search_path); advisory locks need no grant. PUBLIC loses CONNECT, so the
  # grant is seen to be needed.
  admin -c 'REVOKE CONNECT ON DATABASE postgres FROM PUBLIC' -c 'REVOKE CREATE ON SCHEMA public FROM PUBLIC' \
    -c 'CREATE SCHEMA fencekit AUTHORIZATION postgres' >/dev/null
  least_privilege() {
    admin -c "GRANT CONNECT ON DATABASE postgres TO \"$1\"" -c "GRANT USAGE, CREATE ON SCHEMA fencekit TO \"$1\"" \
      -c "ALTER ROLE \"$1\" SET search_path = fencekit" >/dev/null
  }
  if [ -n "${PG_PASSWORD_AUTH:-}" ]; then
    # On stdin, not in argv: ps shows arguments to every user.
    printf "SET password_encryption = 'scram-sha-256';\nCREATE ROLE fencekit LOGIN PASSWORD '%s';\n" \
      "${PG_PASSWORD_AUTH//\'/\'\'}" | admin >/dev/null
    least_privilege fencekit
  fi
  if [ -n "${PG_CERT_USER:-}" ]; then
    admin -c "CREATE ROLE \"$PG_CERT_USER\" LOGIN" >/dev/null
    least_privilege "$PG_CERT_USER"
  fi
fi
echo "STATE_DIR=$dir"
echo "PG_URL=postgres://postgres@127.0.0.1:$port/postgres"
echo "SERVER_0=pg 127.0.0.1:$port $(cat "$dir/pg.pid")"
if [ -n "${PG_TLS_DIR:-}" ]; then
  # Without user and password: the caller adds them (fencekit:PG_PASSWORD_AUTH, or the
  # certificate user with sslcert= and sslkey=). PG_URL above is refused (no hostssl, no password).
  echo "PG_TLS_URL=postgres://127.0.0.1:$port/postgres?sslmode=verify-full&sslrootcert=$PG_TLS_DIR/ca.pem"
  echo "PG_ADMIN_URL=postgres://postgres@localhost/postgres?host=$dir&port=$port"
fi
