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
#   scripts/db.sh --tls COMMAND
#                          the same for the TLS-only server (.dlock/db-tls, port
#                          33307): a throwaway CA and certificates made with openssl
#                          (tls/ in its directory), require_secure_transport=ON,
#                          also bound to 127.0.0.2 (not in the certificate), an
#                          account dlock_x509 that requires a client certificate;
#                          `url` gives ssl_mode=verify_identity with the test CA,
#                          `certs` prints the certificates' directory
#
# Environment: DLOCK_DB_DIR (data and socket dir), DLOCK_DB_PORT (default 33306,
# 33307 with --tls).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tls=0
if [ "${1:-}" = "--tls" ]; then
  tls=1
  shift
fi
if [ "$tls" = 1 ]; then
  dir="${DLOCK_DB_DIR:-$root/.dlock/db-tls}"
  port="${DLOCK_DB_PORT:-33307}"
else
  dir="${DLOCK_DB_DIR:-$root/.dlock/db}"
  port="${DLOCK_DB_PORT:-33306}"
fi
certs="$dir/tls"
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

# Loopback only: 127.0.0.1, and ::1 where the loopback device has IPv6; the
# TLS server also 127.0.0.2, an address its certificate does not name.
bind_addresses() {
  local addresses=127.0.0.1
  [ "$tls" = 1 ] && addresses="$addresses,127.0.0.2"
  if grep -qE '^0{31}1 .* lo$' /proc/net/if_inet6 2>/dev/null; then addresses="$addresses,::1"; fi
  echo "$addresses"
}

# A throwaway CA (and a second one nobody trusts), a server certificate for
# localhost, 127.0.0.1 and ::1, a client certificate, the CA as a hashed
# directory, and two CRLs: one revoking the server's certificate, one empty.
make_certificates() {
  [ -f "$certs/done" ] && return 0
  rm -rf "$certs"
  mkdir -p "$certs/capath" "$certs/crl"
  (
    cd "$certs"
    local days=3650
    openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -keyout ca-key.pem -out ca.pem -subj "/CN=dlock test CA"
    openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -keyout other-ca-key.pem -out other-ca.pem \
      -subj "/CN=another CA"
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj "/CN=localhost"
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" -out server.pem \
      -extfile server.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl req -newkey rsa:2048 -nodes -keyout client-key.pem -out client.csr -subj "/CN=dlock test client"
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" -out client.pem \
      -extfile client.ext
    cp ca.pem capath/ && openssl rehash capath
    cd crl
    printf '[ca]\ndefault_ca=test\n[test]\ndatabase=index.txt\ncrlnumber=crlnumber\ndefault_md=sha256\ndefault_crl_days=%s\n' \
      "$days" >ca.cnf
    : >index.txt
    echo 01 >crlnumber
    openssl ca -config ca.cnf -cert ../ca.pem -keyfile ../ca-key.pem -gencrl -out empty.crl
    openssl ca -config ca.cnf -cert ../ca.pem -keyfile ../ca-key.pem -revoke ../server.pem
    openssl ca -config ca.cnf -cert ../ca.pem -keyfile ../ca-key.pem -gencrl -out revoked.crl
  ) >"$dir/certificates.log" 2>&1 || { cat "$dir/certificates.log" >&2; exit 1; }
  chmod 600 "$certs"/*-key.pem
  touch "$certs/done"
}

# The server's TLS options (the TLS server only).
tls_arguments() {
  [ "$tls" = 1 ] || return 0
  echo "--ssl-ca=$certs/ca.pem --ssl-cert=$certs/server.pem --ssl-key=$certs/server-key.pem"
  echo "--require-secure-transport=ON --performance-schema=ON"
}

# Percent-encodes a path for a URL parameter.
url_encode() {
  local s="$1" out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c="${s:i:1}"
    case "$c" in
      [A-Za-z0-9/._~-]) out+="$c" ;;
      *) out+="$(printf '%%%02X' "'$c")" ;;
    esac
  done
  echo "$out"
}

start() {
  if server_pid >/dev/null && answers; then
    echo "dlock test database already running on 127.0.0.1:$port (pid $(server_pid))"
    return 0
  fi
  local server
  server="$(find_server)" || { echo "db.sh: no mariadbd found; run scripts/install-deps.sh" >&2; exit 1; }
  mkdir -p "$dir"
  [ "$tls" = 1 ] && make_certificates
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
    --skip-log-bin --character-set-server=utf8mb4 $(tls_arguments) >/dev/null 2>&1 &
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
  if [ "$tls" = 1 ]; then
    client <<SQL
CREATE USER IF NOT EXISTS '$user'@'127.0.0.2' IDENTIFIED BY '$pass';
GRANT ALL PRIVILEGES ON *.* TO '$user'@'127.0.0.2' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS '${user}_x509'@'127.0.0.1' IDENTIFIED BY '$pass' REQUIRE X509;
GRANT ALL PRIVILEGES ON *.* TO '${user}_x509'@'127.0.0.1';
SQL
  fi
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
  url)
    if [ "$tls" = 1 ]; then
      echo "mysql://$user:$pass@127.0.0.1:$port/$database?ssl_mode=verify_identity&ssl_ca=$(url_encode "$certs/ca.pem")"
    else
      echo "mysql://$user:$pass@127.0.0.1:$port/$database"
    fi
    ;;
  certs) echo "$certs" ;;
  pid) server_pid ;;
  client)
    shift
    tls_client=()
    [ "$tls" = 1 ] && tls_client=(--ssl-ca="$certs/ca.pem" --ssl-verify-server-cert)
    mariadb --no-defaults "${tls_client[@]}" -h127.0.0.1 -P"$port" -u"$user" -p"$pass" "$database" "$@"
    ;;
  wipe) stop; rm -rf "$dir" ;;
  *) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
