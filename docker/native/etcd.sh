#!/usr/bin/env bash
# usage: etcd.sh [MEMBERS]   (1 or 3; default 1)
# Starts a throwaway etcd (single node or cluster) from the Debian package on free 127.0.0.1 ports
# and prints its endpoints as KEY=value lines. Stop it with: stop.sh "$STATE_DIR".
# Optional: ETCD_TLS_DIR=<dir of certs.sh> serves clients over TLS only and requires a client
# certificate signed by its ca.pem (--client-cert-auth); ETCD_ENDPOINTS are then https://.
source "$(dirname "$0")/lib.sh"
members=${1:-1}
command -v etcd >/dev/null || { echo "etcd.sh: etcd not installed (apt-get install etcd-server etcd-client)" >&2; exit 1; }
dir=$(new_state_dir etcd)
stop_on_failure "$dir"
read -r -a ports <<<"$(free_ports $((members * 2)))"
cluster=()
for ((i = 0; i < members; i++)); do
  cluster+=("m$i=http://127.0.0.1:${ports[$((i * 2 + 1))]}")
done
initial_cluster=$(IFS=,; echo "${cluster[*]}")
endpoints=()
scheme=http
tls=()
if [[ -n ${ETCD_TLS_DIR:-} ]]; then
  scheme=https
  tls=(--cert-file "$ETCD_TLS_DIR/server.pem" --key-file "$ETCD_TLS_DIR/server-key.pem"
    --trusted-ca-file "$ETCD_TLS_DIR/ca.pem" --client-cert-auth)
fi
# Short heartbeat/election timeouts: a single node is healthy in ~0.2 s instead of ~1 s. A cluster
# gets 50/500 ms: a member starved of CPU for 100 ms on a busy 2-core machine calls an election,
# and with 100 ms a CI run saw a cluster grant almost nothing for 15 s after one member's restart.
# Fine on loopback; not production values (etcd's: 100/1000 ms).
timing=(--heartbeat-interval 10 --election-timeout 100)
if ((members > 1)); then timing=(--heartbeat-interval 50 --election-timeout 500); fi
for ((i = 0; i < members; i++)); do
  client=$scheme://127.0.0.1:${ports[$((i * 2))]}
  peer=http://127.0.0.1:${ports[$((i * 2 + 1))]}
  endpoints+=("$client")
  start_bg "$dir" "m$i" etcd --name "m$i" --data-dir "$dir/m$i.data" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$initial_cluster" --initial-cluster-state new --initial-cluster-token "$(basename "$dir")" \
    "${timing[@]}" --log-level error "${tls[@]}"
done
all=$(IFS=,; echo "${endpoints[*]}")
# /health answers {"health":"true"} once the member serves requests with a leader. Plain HTTP over
# bash's /dev/tcp: a fresh etcdctl per attempt can stall ~1 s in gRPC's reconnect backoff.
healthy() {
  local port=${1##*:}
  if [[ -n ${ETCD_TLS_DIR:-} ]]; then
    curl -sf --max-time 1 --cacert "$ETCD_TLS_DIR/ca.pem" --cert "$ETCD_TLS_DIR/client.pem" \
      --key "$ETCD_TLS_DIR/client-key.pem" "$1/health" | grep -q '"health":"true"'
    return
  fi
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET /health HTTP/1.0\r\n\r\n' >&3
  timeout 1 cat <&3 | grep -q '"health":"true"'
  local ok=$?
  exec 3<&-
  return $ok
}
for ((i = 0; i < members; i++)); do
  wait_until "etcd member m$i" "$dir/m$i.log" healthy "${endpoints[$i]}"
done
echo "STATE_DIR=$dir"
echo "ETCD_ENDPOINTS=$all"
for ((i = 0; i < members; i++)); do
  echo "MEMBER_${i}=m$i ${endpoints[$i]} $(cat "$dir/m$i.pid")"
done
