#!/usr/bin/env bash
# Installs the Debian packages dlock needs to build, test and demo, if any is
# missing. Idempotent and quiet when everything is there already.
set -euo pipefail

# Build: compiler, CMake, Connector/C++ 1.1, Boost (Asio), spdlog; the
# dlock command: CLI11, nlohmann-json; tests: GoogleTest, pkg-config,
# dpkg-dev and file (the packaging tests: CPack's Debian generator);
# prometheus-cpp-dev for the optional Prometheus adapter and its test; and
# the MariaDB server binaries plus client tools for the
# private test server (mariadb-server-core, not the mariadb-server service
# package, which would start a system-wide server on systemd hosts); openssl
# makes the TLS test server's throwaway certificates; universal-ctags for the
# lint step's function lengths (scripts/lint.sh).
packages=(
  g++ cmake make pkgconf dpkg-dev file
  libmysqlcppconn-dev libboost-dev libspdlog-dev
  libcli11-dev nlohmann-json3-dev
  libgtest-dev prometheus-cpp-dev
  mariadb-server-core mariadb-client openssl universal-ctags
)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Asio's per-operation cancellation (<dlock/asio.hpp> with Boost 1.77 or
# later) is tested against Boost 1.81's headers, unpacked into .dlock/ beside
# the system's 1.74, which Connector/C++'s package pins. Asio is header-only:
# nothing is installed, and the library itself still builds with 1.74.
boost_dir="$root/.dlock/boost-1.81"
if [ ! -f "$boost_dir/usr/include/boost/version.hpp" ]; then
  echo "install-deps: unpacking the Boost 1.81 headers into $boost_dir"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download -qq libboost1.81-dev >/dev/null 2>&1); then
    $sudo apt-get update -qq
    (cd "$tmp" && apt-get download -qq libboost1.81-dev >/dev/null 2>&1) \
      || { echo "install-deps: cannot download libboost1.81-dev (needed by the cancellation test)" >&2; exit 1; }
  fi
  rm -rf "$boost_dir.partial"
  mkdir -p "$boost_dir.partial"
  dpkg-deb -x "$tmp"/libboost1.81-dev_*.deb "$boost_dir.partial"
  rm -rf "$boost_dir"
  mv "$boost_dir.partial" "$boost_dir"
fi
