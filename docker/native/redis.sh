#!/usr/bin/env bash
# usage: redis.sh [INSTANCES]   (default 1; 3 or 5 independent instances for Redlock)
# Starts throwaway Redis servers (no persistence) from the Debian package on free 127.0.0.1 ports
# and prints their addresses as KEY=value lines. Stop them with: stop.sh "$STATE_DIR".
# Optional, for servers that require TLS and credentials:
#   REDIS_TLS_DIR=<dir of certs.sh>  TLS only (no plain port): server.pem, server-key.pem, ca.pem;
#                                    REDIS_URL is then rediss://
#   REDIS_TLS_AUTH_CLIENTS=yes|no    whether a client certificate is required (default no)
#   REDIS_ACL_FILE=<file>            the users (an ACL file: "user default off", "user fencekit on >pw ...")
source "$(dirname "$0")/lib.sh"
count=${1:-1}
command -v redis-server >/dev/null || { echo "redis.sh: redis-server not installed (apt-get install redis-server)" >&2; exit 1; }
dir=$(new_state_dir redis)
stop_on_failure "$dir"
read -r -a ports <<<"$(free_ports "$count")"
scheme=redis
ping=(redis-cli -h 127.0.0.1)
if [[ -n ${REDIS_TLS_DIR:-} ]]; then
  scheme=rediss
  ping+=(--tls --cacert "$REDIS_TLS_DIR/ca.pem" --cert "$REDIS_TLS_DIR/client.pem" --key "$REDIS_TLS_DIR/client-key.pem")
fi
for ((i = 0; i < count; i++)); do
  listen=(--port "${ports[$i]}")
  if [[ -n ${REDIS_TLS_DIR:-} ]]; then
    listen=(--port 0 --tls-port "${ports[$i]}" --tls-cert-file "$REDIS_TLS_DIR/server.pem"
      --tls-key-file "$REDIS_TLS_DIR/server-key.pem" --tls-ca-cert-file "$REDIS_TLS_DIR/ca.pem"
      --tls-auth-clients "${REDIS_TLS_AUTH_CLIENTS:-no}")
  fi
  acl=()
  if [[ -n ${REDIS_ACL_FILE:-} ]]; then
    cp "$REDIS_ACL_FILE" "$dir/r$i.acl"
    acl=(--aclfile "$dir/r$i.acl")
  fi
  start_bg "$dir" "r$i" redis-server --bind 127.0.0.1 "${listen[@]}" "${acl[@]}" --save '' --appendonly no \
    --dir "$dir" --daemonize no --protected-mode yes
done
for ((i = 0; i < count; i++)); do
  # Up once it answers at all (a server whose default user is off answers NOAUTH).
  wait_until "redis r$i" "$dir/r$i.log" bash -c '"$@" 2>&1 | grep -qE "PONG|NOAUTH"' _ "${ping[@]}" -p "${ports[$i]}" ping
done
echo "STATE_DIR=$dir"
echo "REDIS_URL=$scheme://127.0.0.1:${ports[0]}"
hosts=()
for ((i = 0; i < count; i++)); do hosts+=("127.0.0.1:${ports[$i]}"); done
echo "REDIS_HOSTS=$(IFS=,; echo "${hosts[*]}")"
for ((i = 0; i < count; i++)); do
  echo "INSTANCE_${i}=r$i 127.0.0.1:${ports[$i]} $(cat "$dir/r$i.pid")"
done
