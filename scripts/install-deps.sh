#!/usr/bin/env bash
# Installs the Debian packages dlock needs to build, test and demo, if any is
# missing. Idempotent and quiet when everything is there already.
set -euo pipefail

# Build: compiler, CMake, Connector/C++ 1.1, Boost (Asio), spdlog; the
# dlock command: CLI11, nlohmann-json; tests: GoogleTest, pkg-config (the
# packaging test), and the MariaDB server binaries plus client tools for the
# private test server (mariadb-server-core, not the mariadb-server service
# package, which would start a system-wide server on systemd hosts).
packages=(
  g++ cmake make pkgconf
  libmysqlcppconn-dev libboost-dev libspdlog-dev
  libcli11-dev nlohmann-json3-dev
  libgtest-dev
  mariadb-server-core mariadb-client
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
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
