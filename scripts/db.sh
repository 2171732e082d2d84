#!/usr/bin/env bash
# Private MariaDB for dlock's tests, demo and benchmarks.
#
# The server lives entirely inside the project (default: .dlock/db), listens on
# loopback only, and never touches a system-wide MariaDB. Every command is
# idempotent: `start` on a running server just prints where it is.
#
#   scripts/db.sh start    initialise (first time) and start; waits until ready
#   scripts/db.sh stop     stop it (SIGTERM, then SIGKILL after 20 s)
#   scripts/db.sh kill     kill -9 it (crash tests; `start` recovers the data)
#   scripts/db.sh status   exit 0 when it answers
#   scripts/db.sh url      print the mysql:// URL of the test account
#   scripts/db.sh pid      print the server's process id
#   scripts/db.sh client   open the mariadb client as the test account
#   scripts/db.sh wipe     stop and delete the data directory
#
# Environment: DLOCK_DB_DIR (data and socket dir), DLOCK_DB_PORT (default 33306).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${DLOCK_DB_DIR:-$root/.dlock/db}"
port="${DLOCK_DB_PORT:-33306}"
data="$dir/data"
sock="$dir/mysqld.sock"
pidfile="$dir/mysqld.pid"
log="$dir/mysqld.log"
user=dlock
pass=dlock-test
database=dlock_test

find_server() {
  for c in mariadbd mysqld /usr/sbin/mariadbd /usr/sbin/mysqld; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return 0; fi
  done
  return 1
}

server_pid() {
  [ -f "$pidfile" ] || return 1
  local p
  p="$(cat "$pidfile" 2>/dev/null)" || return 1
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

client() { mariadb --no-defaults --protocol=socket -S "$sock" -uroot "$@"; }

answers() {
  mariadb-admin --no-defaults --protocol=socket -S "$sock" -uroot --connect-timeout=2 ping >/dev/null 2>&1
}

# Loopback only: 127.0.0.1, and ::1 where the loopback device has IPv6.
bind_addresses() {
  if grep -qE '^0{31}1 .* lo$' /proc/net/if_inet6 2>/dev/null; then echo "127.0.0.1,::1"; else echo 127.0.0.1; fi
}

start() {
  if server_pid >/dev/null && answers; then
    echo "dlock test database already running on 127.0.0.1:$port (pid $(server_pid))"
    return 0
  fi
  local server
  server="$(find_server)" || { echo "db.sh: no mariadbd found; run scripts/install-deps.sh" >&2; exit 1; }
  mkdir -p "$dir"
  if [ ! -d "$data/mysql" ]; then
    rm -rf "$data"
    mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$data" \
      --auth-root-authentication-method=socket --skip-test-db >"$dir/install.log" 2>&1 \
      || { cat "$dir/install.log" >&2; exit 1; }
  fi
  # Durable defaults (innodb_flush_log_at_trx_commit=1) are kept on purpose:
  # the benchmarks measure a durable lock.
  "$server" --no-defaults --user="$(id -un)" --datadir="$data" \
    --socket="$sock" --pid-file="$pidfile" --port="$port" --bind-address="$(bind_addresses)" \
    --log-error="$log" --skip-name-resolve --max-connections=1000 \
    --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
    --skip-log-bin --character-set-server=utf8mb4 >/dev/null 2>&1 &
  local i
  for i in $(seq 1 300); do
    if answers; then break; fi
    sleep 0.1
  done
  answers || { echo "db.sh: server did not come up; log follows" >&2; tail -n 30 "$log" >&2; exit 1; }
  client <<SQL
CREATE DATABASE IF NOT EXISTS \`$database\`;
CREATE USER IF NOT EXISTS '$user'@'127.0.0.1' IDENTIFIED BY '$pass';
CREATE USER IF NOT EXISTS '$user'@'localhost' IDENTIFIED BY '$pass';
CREATE USER IF NOT EXISTS '$user'@'::1' IDENTIFIED BY '$pass';
GRANT ALL PRIVILEGES ON *.* TO '$user'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$user'@'localhost' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$user'@'::1' WITH GRANT OPTION;
SQL
  echo "dlock test database running on 127.0.0.1:$port (pid $(server_pid))"
}

stop() {
  local p
  if ! p="$(server_pid)"; then echo "dlock test database not running"; return 0; fi
  kill -CONT "$p" 2>/dev/null || true   # a test may have paused it
  kill -TERM "$p" 2>/dev/null || true
  local i
  for i in $(seq 1 200); do
    kill -0 "$p" 2>/dev/null || { echo "dlock test database stopped"; return 0; }
    sleep 0.1
  done
  kill -KILL "$p" 2>/dev/null || true
  echo "dlock test database killed after 20 s"
}

crash() {
  local p
  p="$(server_pid)" || return 0
  kill -KILL "$p" 2>/dev/null || true
  while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
  rm -f "$pidfile"
}

case "${1:-}" in
  start) start ;;
  kill) crash ;;
  stop) stop ;;
  status) server_pid >/dev/null && answers ;;
  url) echo "mysql://$user:$pass@127.0.0.1:$port/$database" ;;
  pid) server_pid ;;
  client) shift; mariadb --no-defaults -h127.0.0.1 -P"$port" -u"$user" -p"$pass" "$database" "$@" ;;
  wipe) stop; rm -rf "$dir" ;;
  *) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
