#!/usr/bin/env bash
# Builds the Debian packages with CPack (cmake/DlockPackaging.cmake):
#   libdlock-dev  headers, library, CMake package config, pkg-config file
#   dlock         the command and its manual page dlock(1)
# in a Release build of its own, and checks them with lintian (a finding of
# severity error fails). Prints the packages' paths on its last lines.
#
#   scripts/package.sh [--build-dir DIR]     (default: build-package/)
#
# Install them with `sudo apt install ./libdlock-dev_*.deb ./dlock_*.deb`.
# The test command checks the same packages from its own build tree
# (ctest -R package_debs: unpacked into a scratch root, then a consumer is
# built with find_package(dlock) and with pkg-config and run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$root/build-package"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    *) echo "package.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
"$root/scripts/install-deps.sh"
if ! command -v lintian >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "package.sh: installing lintian"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends lintian >/dev/null
fi
mkdir -p "$build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DDLOCK_INSTALL=ON \
  -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_WERROR=ON \
  >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log" >&2; exit 1; }
cmake --build "$build_dir" -j "$(nproc)" >"$build_dir/build.log" 2>&1 || { tail -n 50 "$build_dir/build.log" >&2; exit 1; }
rm -f "$build_dir"/*.deb
(cd "$build_dir" && cpack -G DEB >"$build_dir/cpack.log" 2>&1) || { cat "$build_dir/cpack.log" >&2; exit 1; }
# An initial release closes no bug reports; anything of severity error fails.
lintian --fail-on error --suppress-tags initial-upload-closes-no-bugs "$build_dir"/*.deb
ls "$build_dir"/*.deb
