#!/usr/bin/env bash
# A private three-node MariaDB Galera cluster and an HAProxy in front of it,
# on loopback, for dlock's cluster tests (the counterpart of scripts/db.sh).
#
# Everything lives inside the project (default: .dlock/cluster) and listens on
# 127.0.0.1 only; no system-wide server is started or touched. Commands:
#
#   scripts/cluster.sh start            install what is missing, start the
#                                       nodes and the proxy; waits until all
#                                       three nodes are Synced
#   scripts/cluster.sh stop             stop the proxy and the nodes (the last
#                                       one stopped can bootstrap next time)
#   scripts/cluster.sh kill N           kill -9 node N (1-3)
#   scripts/cluster.sh pause N          SIGSTOP node N; `resume N` sends SIGCONT
#   scripts/cluster.sh restart N [--sst]
#                                       (stop node N if it runs, then) start it
#                                       again and wait until it is Synced:
#                                       by IST from its recovered position, or
#                                       by a full state transfer with --sst
#   scripts/cluster.sh stop-node N      stop node N cleanly
#   scripts/cluster.sh isolate N        drop every packet between node N and
#                                       the other two (nftables; no process is
#                                       touched, clients still reach node N):
#                                       N falls out of the primary component
#   scripts/cluster.sh heal             remove the rules isolate added
#   scripts/cluster.sh status           one line per node and for the proxy;
#                                       exit 0 when all three are Synced
#   scripts/cluster.sh url [N|proxy|all]
#                                       a mysql:// URL of the test account: of
#                                       node N, of the proxy, or (all, the
#                                       default) every node in one URL
#   scripts/cluster.sh pid N|proxy      a process id
#   scripts/cluster.sh client N [args]  the mariadb client on node N
#   scripts/cluster.sh wipe             stop and delete the cluster's directory
#
# Environment: DLOCK_CLUSTER_DIR (default .dlock/cluster), DLOCK_CLUSTER_PORT
# (default 34306: the proxy; node N serves SQL on PORT+N on 127.0.0.1, and
# talks to the other nodes from an address of its own, 127.0.1.N: group
# communication on PORT+100+N, IST on PORT+200+N, SST on PORT+300+N).
#
# Why it is done this way (measured on this project's 2-core VM):
# - The nodes run as the `mysql` user when started by root: the rsync state
#   transfer refuses to run as root. Each node has an option file of its own,
#   because the state-transfer scripts read the node's settings back from it.
# - Galera needs row-based replication (binlog_format=ROW) and interleaved
#   auto-increment locking (innodb_autoinc_lock_mode=2).
# - A node killed with -9 rejoins by incremental state transfer (IST, ~7 s)
#   when it is started with the position `--wsrep-recover` finds in its own
#   data; without that position it needs a full transfer (SST, ~13 s).
# - HAProxy sends every connection to node 1 and to nodes 2 and 3 only while
#   node 1 is down (`backup`): a single writer, the mode dlock is fastest in.
# - Node N's replication traffic comes from and goes to 127.0.1.N only
#   (Galera binds its outgoing connections to gmcast.listen_addr's host), so
#   `isolate N` can cut N off from the others by address with nftables while
#   clients keep reaching every node's SQL port on 127.0.0.1.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${DLOCK_CLUSTER_DIR:-$root/.dlock/cluster}"
base_port="${DLOCK_CLUSTER_PORT:-34306}"
user=dlock
pass=dlock-test
database=dlock_test
check_user=dlock_haproxy
nodes=(1 2 3)

die() { echo "cluster.sh: $*" >&2; exit 1; }

sql_port() { echo $((base_port + $1)); }
node_host() { echo "127.0.1.$1"; }
gcomm_port() { echo $((base_port + 100 + $1)); }
ist_port() { echo $((base_port + 200 + $1)); }
sst_port() { echo $((base_port + 300 + $1)); }
node_dir() { echo "$dir/node$1"; }
sock() { echo "$(node_dir "$1")/mysqld.sock"; }
pidfile() { echo "$(node_dir "$1")/mysqld.pid"; }
proxy_pidfile() { echo "$dir/haproxy.pid"; }

valid_node() {
  case "${1:-}" in 1|2|3) ;; *) die "node must be 1, 2 or 3 (got '${1:-}')" ;; esac
}

# --- installation -----------------------------------------------------------

install_packages() {
  local packages=(galera-4 mariadb-server mariadb-client haproxy rsync socat iproute2 procps nftables)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "cluster.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # mariadb-server and haproxy would start system-wide services on install;
  # a policy-rc.d that denies every start keeps the machine as it was (Docker
  # images ship one already; only a file we created is removed again).
  local policy=/usr/sbin/policy-rc.d created_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    created_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local rc=0
  { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } || rc=$?
  [ -n "$created_policy" ] && $sudo rm -f "$policy"
  [ "$rc" -eq 0 ] || die "package installation failed"
}

find_server() {
  local c
  for c in mariadbd mysqld /usr/sbin/mariadbd /usr/sbin/mysqld; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return 0; fi
  done
  return 1
}

galera_library() {
  local f
  for f in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so /usr/lib/galera-4/libgalera_smm.so; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

# The account the servers run as: ourselves, or `mysql` when we are root.
run_user() {
  if [ "$(id -u)" -eq 0 ]; then echo mysql; else id -un; fi
}

# --- one node ----------------------------------------------------------------

# By command line, not by pid file: a joining node writes its pid file only
# after its state transfer. (The state-transfer scripts carry the option file
# in their arguments too, but not at the start of their command line.)
node_pid() {
  pgrep -o -f -- "^[^ ]*(mariadbd|mysqld) --defaults-file=$(node_dir "$1")/my.cnf( |\$)"
}

root_client() {
  local n="$1"; shift
  mariadb --no-defaults --protocol=socket -S "$(sock "$n")" -uroot --connect-timeout=2 "$@"
}

status_var() {
  root_client "$1" -N -B -e "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}'
}

synced() {
  [ "$(status_var "$1" wsrep_local_state_comment)" = "Synced" ] && [ "$(status_var "$1" wsrep_ready)" = "ON" ]
}

write_config() {
  local n="$1" d addresses="" i
  d="$(node_dir "$n")"
  for i in "${nodes[@]}"; do addresses+="${addresses:+,}$(node_host "$i"):$(gcomm_port "$i")"; done
  cat >"$d/my.cnf" <<EOF
# Written by scripts/cluster.sh; rewritten on every start.
[mysqld]
datadir=$d/data
socket=$(sock "$n")
pid-file=$(pidfile "$n")
log-error=$d/mysqld.log
port=$(sql_port "$n")
bind-address=127.0.0.1
skip-name-resolve
max-connections=1000
character-set-server=utf8mb4
innodb-buffer-pool-size=128M
innodb-log-file-size=64M
default-storage-engine=InnoDB
binlog-format=ROW
innodb-autoinc-lock-mode=2
wsrep-on=ON
wsrep-provider=$(galera_library)
wsrep-cluster-name=dlock-test
wsrep-cluster-address=gcomm://$addresses
wsrep-node-name=node$n
wsrep-node-address=$(node_host "$n"):$(gcomm_port "$n")
wsrep-node-incoming-address=127.0.0.1:$(sql_port "$n")
wsrep-provider-options=gmcast.listen_addr=tcp://$(node_host "$n"):$(gcomm_port "$n");ist.recv_addr=$(node_host "$n"):$(ist_port "$n")
wsrep-sst-method=rsync
wsrep-sst-receive-address=$(node_host "$n"):$(sst_port "$n")
EOF
}

prepare_node() {
  local n="$1" d
  d="$(node_dir "$n")"
  mkdir -p "$d"
  write_config "$n"
  if [ ! -d "$d/data/mysql" ]; then
    rm -rf "$d/data"
    mariadb-install-db --no-defaults --user="$(run_user)" --datadir="$d/data" \
      --auth-root-authentication-method=socket --skip-test-db >"$d/install.log" 2>&1 \
      || { cat "$d/install.log" >&2; die "mariadb-install-db failed for node $n"; }
  fi
  [ "$(id -u)" -eq 0 ] && chown -R "$(run_user)": "$d"
  return 0
}

# seqno from grastate.dat, or from --wsrep-recover when the node crashed
# (grastate.dat then says -1).
recovered_position() {
  local n="$1" d server out
  d="$(node_dir "$n")"
  server="$(find_server)"
  rm -f "$d/recover.log"
  "$server" --defaults-file="$d/my.cnf" --user="$(run_user)" --wsrep-recover --log-error="$d/recover.log" >/dev/null 2>&1 || true
  out="$(grep -o 'Recovered position: [^ ]*' "$d/recover.log" 2>/dev/null | tail -n 1 | sed 's/Recovered position: //')" || true
  echo "$out"
}

seqno_of() {
  local n="$1" g
  g="$(node_dir "$n")/data/grastate.dat"
  [ -f "$g" ] || { echo -1; return; }
  local s
  s="$(awk '/^seqno:/ {print $2}' "$g")"
  if [ -z "$s" ] || [ "$s" = "-1" ]; then
    local pos
    pos="$(recovered_position "$n")"
    s="${pos##*:}"
  fi
  echo "${s:--1}"
}

launch_node() {
  local n="$1"; shift
  local d server
  d="$(node_dir "$n")"
  server="$(find_server)" || die "no mariadbd found"
  # Through a shell so the server is not a child of whatever runs this script
  # (a test harness waiting on our stdout would otherwise wait for it).
  ( "$server" --defaults-file="$d/my.cnf" --user="$(run_user)" "$@" </dev/null >>"$d/mysqld.out" 2>&1 & )
}

wait_synced() {
  local n="$1" seconds="$2" i
  for i in $(seq 1 $((seconds * 10))); do
    if synced "$n"; then return 0; fi
    if [ "$i" -gt 20 ] && ! node_pid "$n" >/dev/null; then
      tail -n 30 "$(node_dir "$n")/mysqld.log" >&2
      die "node $n exited while starting (log above)"
    fi
    sleep 0.1
  done
  tail -n 30 "$(node_dir "$n")/mysqld.log" >&2
  die "node $n not Synced after ${seconds} s (log above)"
}

# args+=(--wsrep-start-position=...) when node N's data knows where it stopped
# (grastate.dat says so after a clean stop; --wsrep-recover reads it out of
# InnoDB after a crash).
start_position_args() {
  local n="$1" g pos uuid seqno
  g="$(node_dir "$n")/data/grastate.dat"
  [ -f "$g" ] || return 0
  uuid="$(awk '/^uuid:/ {print $2}' "$g")"
  seqno="$(awk '/^seqno:/ {print $2}' "$g")"
  if [ -n "$uuid" ] && [ -n "$seqno" ] && [ "$seqno" != "-1" ]; then
    return 0   # the server reads a clean stop's position from grastate.dat itself
  fi
  pos="$(recovered_position "$n")"
  if [ -n "$pos" ] && [ "${pos##*:}" != "-1" ]; then args+=(--wsrep-start-position="$pos"); fi
  return 0
}

# Start node N into the running cluster: IST from its recovered position when
# it has one, SST otherwise (or when asked).
# A joiner's state transfer starts an rsync daemon on the node's SST port; if
# anything already listens there, the transfer fails with a bare "EBUSY" deep
# in the node's log. A leftover rsync daemon of this node's own (its config
# lives in the node's data directory) is stopped; anything else is an error
# that names the port.
free_sst_port() {
  local n="$1" port pids p
  port="$(sst_port "$n")"
  pids="$(ss -Htlnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u || true)"
  [ -z "$pids" ] && return 0
  for p in $pids; do
    if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "rsync.*--config $(node_dir "$n")/data/"; then
      kill "$p" 2>/dev/null || true
    else
      die "node $n's state transfer port $port is taken by pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)); stop it or set DLOCK_CLUSTER_PORT"
    fi
  done
  sleep 0.5
}

join_node() {
  local n="$1" force_sst="${2:-}" args=()
  node_pid "$n" >/dev/null && { synced "$n" && return 0; wait_synced "$n" 120; return 0; }
  prepare_node "$n"
  local d
  d="$(node_dir "$n")"
  if [ -n "$force_sst" ]; then
    rm -f "$d/data/grastate.dat" "$d/data/galera.cache"
  else
    start_position_args "$n"
  fi
  free_sst_port "$n"
  local started=$SECONDS
  launch_node "$n" "${args[@]}"
  wait_synced "$n" 120
  echo "node $n joined and Synced in $((SECONDS - started)) s${args[*]:+ (from its recovered position)}${force_sst:+ (full state transfer)}"
}

bootstrap_node() {
  local n="$1" d args=()
  d="$(node_dir "$n")"
  prepare_node "$n"
  if [ -f "$d/data/grastate.dat" ]; then
    start_position_args "$n"
    sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$d/data/grastate.dat"
  fi
  launch_node "$n" --wsrep-new-cluster "${args[@]}"
  wait_synced "$n" 60
  echo "node $n bootstrapped a new cluster"
}

create_accounts() {
  # Replicated to every node (DDL and account statements are).
  root_client "$1" <<SQL
CREATE DATABASE IF NOT EXISTS \`$database\`;
CREATE USER IF NOT EXISTS '$user'@'127.0.0.1' IDENTIFIED BY '$pass';
CREATE USER IF NOT EXISTS '$user'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL PRIVILEGES ON *.* TO '$user'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$user'@'localhost' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS '$check_user'@'127.0.0.1';
SQL
}

# --- the proxy ----------------------------------------------------------------

proxy_pid() {
  local f p
  f="$(proxy_pidfile)"
  [ -f "$f" ] || return 1
  p="$(head -n 1 "$f" 2>/dev/null)" || return 1
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

start_proxy() {
  proxy_pid >/dev/null && return 0
  # Health checks every 500 ms, down after 2 failures; sessions on a server
  # marked down are cut so their clients notice at once.
  cat >"$dir/haproxy.cfg" <<EOF
# Written by scripts/cluster.sh.
global
  maxconn 2000
defaults
  mode tcp
  timeout connect 2s
  timeout client 1h
  timeout server 1h
listen galera
  bind 127.0.0.1:$base_port
  option mysql-check user $check_user
  default-server inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
  server node1 127.0.0.1:$(sql_port 1) check
  server node2 127.0.0.1:$(sql_port 2) check backup
  server node3 127.0.0.1:$(sql_port 3) check backup
EOF
  haproxy -q -D -f "$dir/haproxy.cfg" -p "$(proxy_pidfile)" || die "haproxy did not start"
}

stop_proxy() {
  local p
  p="$(proxy_pid)" || return 0
  kill -TERM "$p" 2>/dev/null || true
  rm -f "$(proxy_pidfile)"
}

# --- commands -----------------------------------------------------------------

start() {
  install_packages
  find_server >/dev/null || die "no mariadbd found"
  galera_library >/dev/null || die "no libgalera_smm.so found (package galera-4)"
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    # The servers run as mysql: every directory above ours must let it through.
    su -s /bin/sh mysql -c "test -x '$(dirname "$dir")'" 2>/dev/null \
      || die "user mysql cannot reach $dir; set DLOCK_CLUSTER_DIR to a directory it can reach"
  fi
  local n running=()
  for n in "${nodes[@]}"; do node_pid "$n" >/dev/null && running+=("$n"); done
  if [ ${#running[@]} -eq 0 ]; then
    # Bootstrap from the node with the latest state (after a clean stop, the
    # one stopped last; after a crash, the one whose recovered seqno is
    # highest; on a fresh directory, node 1).
    local best=1 best_seqno=-2 s
    for n in "${nodes[@]}"; do
      [ -f "$(node_dir "$n")/data/grastate.dat" ] || continue
      s="$(seqno_of "$n")"
      if [ "$s" -gt "$best_seqno" ]; then best="$n"; best_seqno="$s"; fi
    done
    bootstrap_node "$best"
    create_accounts "$best"
    running=("$best")
  fi
  for n in "${nodes[@]}"; do join_node "$n"; done
  create_accounts "${running[0]}"
  start_proxy
  status
}

stop_node() {
  local n="$1" p i
  p="$(node_pid "$n")" || return 0
  kill -CONT "$p" 2>/dev/null || true
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 300); do
    kill -0 "$p" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$p" 2>/dev/null || true
}

# isolate N: an nftables table of our own that drops every packet between
# node N's address and the other nodes' (both ways; the output hook sees
# loopback traffic). `heal` deletes the table.
isolate() {
  local n="$1" others="" i
  command -v nft >/dev/null 2>&1 || die "isolate needs nft (package nftables)"
  for i in "${nodes[@]}"; do [ "$i" = "$n" ] || others+="${others:+, }$(node_host "$i")"; done
  heal
  nft -f - <<RULES || die "nft could not add the isolation rules"
table inet dlock_cluster {
  chain output {
    type filter hook output priority 0; policy accept;
    ip saddr $(node_host "$n") ip daddr { $others } drop
    ip saddr { $others } ip daddr $(node_host "$n") drop
  }
}
RULES
}

heal() {
  command -v nft >/dev/null 2>&1 || return 0
  if nft list table inet dlock_cluster >/dev/null 2>&1; then nft delete table inet dlock_cluster; fi
  return 0
}

stop() {
  heal
  stop_proxy
  # Node 1 last: it is then the one that may bootstrap the next start.
  stop_node 3; stop_node 2; stop_node 1
  echo "cluster stopped"
}

kill_node() {
  local p
  p="$(node_pid "$1")" || return 0
  kill -KILL "$p" 2>/dev/null || true
  while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
}

status() {
  local n ok=0 p size state
  for n in "${nodes[@]}"; do
    if p="$(node_pid "$n")"; then
      state="$(status_var "$n" wsrep_local_state_comment || true)"
      size="$(status_var "$n" wsrep_cluster_size || true)"
      echo "node$n 127.0.0.1:$(sql_port "$n") pid $p state ${state:-unreachable} cluster_size ${size:-?}"
      [ "$state" = "Synced" ] || ok=1
    else
      echo "node$n 127.0.0.1:$(sql_port "$n") down"
      ok=1
    fi
  done
  if p="$(proxy_pid)"; then echo "proxy 127.0.0.1:$base_port pid $p"; else echo "proxy 127.0.0.1:$base_port down"; ok=1; fi
  return $ok
}

url() {
  case "${1:-all}" in
    all)
      local hosts="" n
      for n in "${nodes[@]}"; do hosts+="${hosts:+,}127.0.0.1:$(sql_port "$n")"; done
      echo "mysql://$user:$pass@$hosts/$database" ;;
    proxy) echo "mysql://$user:$pass@127.0.0.1:$base_port/$database" ;;
    *) valid_node "$1"; echo "mysql://$user:$pass@127.0.0.1:$(sql_port "$1")/$database" ;;
  esac
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  start) start ;;
  stop) stop ;;
  kill) valid_node "${1:-}"; kill_node "$1" ;;
  pause) valid_node "${1:-}"; p="$(node_pid "$1")" && kill -STOP "$p" ;;
  resume) valid_node "${1:-}"; p="$(node_pid "$1")" && kill -CONT "$p" ;;
  restart)
    valid_node "${1:-}"
    n="$1"; shift
    sst=""
    [ "${1:-}" = "--sst" ] && sst=1
    stop_node "$n"
    join_node "$n" "$sst" ;;
  stop-node) valid_node "${1:-}"; stop_node "$1" ;;
  isolate) valid_node "${1:-}"; isolate "$1" ;;
  heal) heal ;;
  status) status ;;
  url) url "${1:-all}" ;;
  pid)
    case "${1:-}" in
      proxy) proxy_pid ;;
      *) valid_node "${1:-}"; node_pid "$1" ;;
    esac ;;
  client) valid_node "${1:-}"; n="$1"; shift; mariadb --no-defaults -h127.0.0.1 -P"$(sql_port "$n")" -u"$user" -p"$pass" "$database" "$@" ;;
  wipe) stop; rm -rf "$dir" ;;
  *) sed -n '2,39p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
