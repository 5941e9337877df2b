#!/usr/bin/env bash
# usage: zookeeper.sh [NODES] [TICK_MS]   (1 = standalone, 3 = ensemble; tickTime default 200)
# Starts a throwaway ZooKeeper from the Debian package on free 127.0.0.1 ports and prints its
# connect string as KEY=value lines. Stop it with: stop.sh "$STATE_DIR".
# The server clamps session timeouts to 2..20 x tickTime: 200 ms allows 400 ms..4 s sessions.
# Fault tests may route peer links through proxies: ZK_PORTS="p1 p2 …" (3 per node: client, quorum,
# election) fixes the ports, and ZK_PEER_VIEW="i:j:quorum:election …" makes node i's config reach
# node j at those ports instead of j's own. ZK_CONTAINER_CHECK_MS sets how often the leader removes
# empty container nodes (znode.container.checkIntervalMs, a Java system property; default 60 s).
# Optional, for servers that require TLS (single node or ensemble; the peer links stay plain):
#   ZK_TLS_DIR=<dir of certs.sh>     TLS only: a secureClientPort and no clientPort, on Netty (the
#                                    NIO factory has no TLS), with server.pem/server-key.pem and ca.pem
#                                    read as PEM stores (ZooKeeper 3.5.5 and later); ZK_CONNECT then
#                                    names the secure ports
#   ZK_TLS_CLIENT_AUTH=need|none     whether a client certificate is required (default need)
#   ZK_TLS_CERT=<name>               the server's certificate: <name>.pem and <name>-key.pem of
#                                    ZK_TLS_DIR (default server; other-host for a name check)
#   ZK_TLS_PROTOCOL=TLSv1.3          TLS 1.3 only (default: ZooKeeper's, TLS 1.2)
source "$(dirname "$0")/lib.sh"
nodes=${1:-1}
tick=${2:-200}
jar=/usr/share/java/zookeeper.jar
[ -e "$jar" ] || { echo "zookeeper.sh: ZooKeeper not installed (apt-get install zookeeper)" >&2; exit 1; }
classpath="$jar:/usr/share/java/slf4j-simple.jar"
dir=$(new_state_dir zookeeper)
stop_on_failure "$dir"
tls_dir=${ZK_TLS_DIR:-}
if [[ -n $tls_dir ]]; then
  # The jar's manifest names netty-handler but not the codec and resolver jars its SslHandler needs.
  classpath+=":/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar"
  # A PEM key store is one file with the certificate and its key.
  cert=${ZK_TLS_CERT:-server}
  cat "$tls_dir/$cert.pem" "$tls_dir/$cert-key.pem" >"$dir/keystore.pem"
  chmod 600 "$dir/keystore.pem"
fi
read -r -a ports <<<"${ZK_PORTS:-$(free_ports $((nodes * 3)))}"
declare -A view=()
for entry in ${ZK_PEER_VIEW:-}; do
  IFS=: read -r from to quorum election <<<"$entry"
  view["$from:$to"]="$quorum:$election"
done
connect=()
for ((i = 1; i <= nodes; i++)); do connect+=("127.0.0.1:${ports[$(((i - 1) * 3))]}"); done
for ((i = 1; i <= nodes; i++)); do
  data="$dir/n$i.data"
  mkdir -p "$data"
  client_port=${ports[$(((i - 1) * 3))]}
  {
    echo "tickTime=$tick"
    echo "initLimit=20"
    echo "syncLimit=10"
    echo "dataDir=$data"
    if [[ -n $tls_dir ]]; then
      echo "secureClientPort=$client_port"
      echo "secureClientPortAddress=127.0.0.1"
      echo "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"
      echo "ssl.keyStore.location=$dir/keystore.pem"
      echo "ssl.keyStore.type=PEM"
      echo "ssl.trustStore.location=$tls_dir/ca.pem"
      echo "ssl.trustStore.type=PEM"
      echo "ssl.clientAuth=${ZK_TLS_CLIENT_AUTH:-need}"
      if [[ ${ZK_TLS_PROTOCOL:-} == TLSv1.3 ]]; then
        # ZooKeeper's default cipher suites are TLS 1.2's: name 1.3's too, or no handshake succeeds.
        echo "ssl.protocol=TLSv1.3"
        echo "ssl.enabledProtocols=TLSv1.3"
        echo "ssl.ciphersuites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384"
      fi
    else
      echo "clientPort=$client_port"
      echo "clientPortAddress=127.0.0.1"
    fi
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=srvr,ruok,mntr"
    echo "maxSessionTimeout=$((tick * 20))"
    # Tests open many sessions from 127.0.0.1; the default allows 60 per address.
    echo "maxClientCnxns=0"
    # Leader election resends its vote with a doubling wait capped at 60 s by default: a member
    # restarted while its peers were re-electing could sit out that long (a restart test once waited
    # 30 s in CI). Unknown keys become zookeeper.* system properties, so this caps it at 2 s.
    echo "fastleader.maxNotificationInterval=2000"
    if ((nodes > 1)); then
      for ((j = 1; j <= nodes; j++)); do
        peer=${view["$i:$j"]:-${ports[$(((j - 1) * 3 + 1))]}:${ports[$(((j - 1) * 3 + 2))]}}
        echo "server.$j=127.0.0.1:$peer"
      done
    fi
  } >"$dir/n$i.cfg"
  ((nodes > 1)) && echo "$i" >"$data/myid"
  start_bg "$dir" "n$i" java -Xmx256m -XX:+UseSerialGC -Dzookeeper.jmx.log4j.disable=true \
    ${ZK_CONTAINER_CHECK_MS:+"-Dznode.container.checkIntervalMs=$ZK_CONTAINER_CHECK_MS"} \
    -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/n$i.cfg"
done
serving() { zk_4lw "$1" srvr | grep -Eq '^Mode: (standalone|leader|follower)'; }
if [[ -n $tls_dir ]]; then
  # Four-letter words over TLS, with the client certificate (the server may require one).
  serving() {
    echo srvr | timeout 5 openssl s_client -connect "127.0.0.1:$1" -CAfile "$tls_dir/ca.pem" \
      -cert "$tls_dir/client.pem" -key "$tls_dir/client-key.pem" -quiet 2>/dev/null |
      grep -Eq '^Mode: (standalone|leader|follower)'
  }
fi
# An ensemble's first election can take long on a loaded machine (JVMs starting beside other test
# servers): a generous limit, left at once if the node exited (a port taken meanwhile, say).
for ((i = 1; i <= nodes; i++)); do
  WAIT_PID=$(cat "$dir/n$i.pid") SECONDS_LIMIT=${SECONDS_LIMIT:-60} \
    wait_until "ZooKeeper node n$i" "$dir/n$i.log" serving "${ports[$(((i - 1) * 3))]}"
done
echo "STATE_DIR=$dir"
echo "ZK_CONNECT=$(IFS=,; echo "${connect[*]}")"
for ((i = 1; i <= nodes; i++)); do
  echo "NODE_$((i - 1))=n$i ${connect[$((i - 1))]} $(cat "$dir/n$i.pid")"
done
