#!/usr/bin/env bash
# Installs the Debian packages dlock needs to build, test and demo, if any is
# missing. Idempotent and quiet when everything is there already.
set -euo pipefail

packages=(
  g++ cmake make
  libmysqlcppconn-dev libboost-dev libspdlog-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  mariadb-server mariadb-client
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# mariadb-server's maintainer scripts try to start the system service; the
# project never uses it (scripts/db.sh runs a private server), so a refusal
# to start it is harmless.
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
