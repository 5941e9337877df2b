# Shared by the server scripts: state directories, free ports, waiting, pid files.
# Every server records "<state dir>/<name>.pid"; stop.sh kills exactly those PIDs.

set -euo pipefail

# A fresh state directory for one group of servers (its data, logs and pid files).
new_state_dir() {
  local kind=$1
  local base=${FENCEKIT_SERVERS_ROOT:-${TMPDIR:-/tmp}}
  mkdir -p "$base"
  mktemp -d "$base/fencekit-$kind.XXXXXX"
}

# A start script that fails (a server that never serves, a port taken meanwhile, a timeout that
# ends the script) stops what it had started and deletes its state directory, so that nothing is
# left behind for leftovers.sh to find. Call it right after new_state_dir.
stop_on_failure() {
  _fencekit_state_dir=$1
  trap '_fencekit_on_exit $?' EXIT
  # A signal ends the script through the EXIT trap above (bash skips it on an untrapped SIGTERM).
  trap 'exit 143' TERM
  trap 'exit 130' INT
}
_fencekit_on_exit() {
  local status=$1
  ((status == 0)) && return 0
  echo "start script failed (exit $status): stopping what it started in $_fencekit_state_dir" >&2
  bash "$(dirname "${BASH_SOURCE[0]}")/stop.sh" "$_fencekit_state_dir" >&2 || true
}

# N free TCP ports on 127.0.0.1, space-separated (asked from the kernel, all held until all are known).
free_ports() {
  node -e '
    const net = require("node:net");
    const n = Number(process.argv[1]);
    const servers = [];
    const next = () => {
      if (servers.length === n) {
        console.log(servers.map((s) => s.address().port).join(" "));
        servers.forEach((s) => s.close());
        return;
      }
      const s = net.createServer();
      s.listen(0, "127.0.0.1", () => { servers.push(s); next(); });
    };
    next();
  ' "$1"
}

# Starts a server in the background with its output in a log file, records its PID.
# usage: start_bg STATE_DIR NAME command args...
start_bg() {
  local dir=$1 name=$2
  shift 2
  # setsid: its own process group, so a Ctrl-C in the terminal reaches the test runner, not the server.
  setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

# Whether process $1 runs (a zombie, not yet reaped by this shell, does not).
_running() {
  local stat
  stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $stat != Z* ]]
}

# Retries "$@" until it succeeds or SECONDS_LIMIT (default 30) pass; then prints the log and fails.
# With WAIT_PID set, it fails at once when that process has exited (e.g. a port taken meanwhile)
# instead of waiting out the limit.
wait_until() {
  local what=$1 log=$2
  shift 2
  local limit=${SECONDS_LIMIT:-30}
  local deadline=$((SECONDS + limit))
  local pid=${WAIT_PID:-}
  until "$@" >/dev/null 2>&1; do
    if [[ -n $pid ]] && ! _running "$pid"; then
      echo "$what exited before it came up; last lines of $log:" >&2
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    if ((SECONDS >= deadline)); then
      echo "$what did not come up within ${limit}s; last lines of $log:" >&2
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    sleep 0.05
  done
}

# Sends a four-letter word to a ZooKeeper port and prints the answer (bash's /dev/tcp, no netcat needed).
zk_4lw() {
  local port=$1 word=$2
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf '%s' "$word" >&3
  timeout 2 cat <&3
  exec 3<&-
}
