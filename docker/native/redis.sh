#!/usr/bin/env bash
# usage: redis.sh [INSTANCES]   (default 1; 3 or 5 independent instances for Redlock)
# Starts throwaway Redis servers (no persistence) from the Debian package on free 127.0.0.1 ports
# and prints their addresses as KEY=value lines. Stop them with: stop.sh "$STATE_DIR".
source "$(dirname "$0")/lib.sh"
count=${1:-1}
command -v redis-server >/dev/null || { echo "redis.sh: redis-server not installed (apt-get install redis-server)" >&2; exit 1; }
dir=$(new_state_dir redis)
stop_on_failure "$dir"
read -r -a ports <<<"$(free_ports "$count")"
for ((i = 0; i < count; i++)); do
  start_bg "$dir" "r$i" redis-server --bind 127.0.0.1 --port "${ports[$i]}" --save '' --appendonly no \
    --dir "$dir" --daemonize no --protected-mode yes
done
for ((i = 0; i < count; i++)); do
  wait_until "redis r$i" "$dir/r$i.log" redis-cli -h 127.0.0.1 -p "${ports[$i]}" ping
done
echo "STATE_DIR=$dir"
echo "REDIS_URL=redis://127.0.0.1:${ports[0]}"
hosts=()
for ((i = 0; i < count; i++)); do hosts+=("127.0.0.1:${ports[$i]}"); done
echo "REDIS_HOSTS=$(IFS=,; echo "${hosts[*]}")"
for ((i = 0; i < count; i++)); do
  echo "INSTANCE_${i}=r$i 127.0.0.1:${ports[$i]} $(cat "$dir/r$i.pid")"
done
