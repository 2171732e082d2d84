#!/usr/bin/env bash
# Configures and builds dlock.
#
#   scripts/build.sh [--sanitize address|thread] [--build-dir DIR] [--release]
#
# Prints the build directory on its last line. The default build directory is
# build/ (build-asan/ or build-tsan/ with --sanitize).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize=""
build_dir=""
build_type="RelWithDebInfo"
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --release) build_type="Release"; shift ;;
    *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$sanitize" in
  "") default_dir="$root/build" ;;
  address) default_dir="$root/build-asan" ;;
  thread) default_dir="$root/build-tsan" ;;
  *) echo "build.sh: --sanitize takes address or thread" >&2; exit 2 ;;
esac
build_dir="${build_dir:-$default_dir}"
mkdir -p "$build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DDLOCK_WERROR=ON \
  -DDLOCK_SANITIZE="$sanitize" >"$build_dir/configure.log" 2>&1 \
  || { cat "$build_dir/configure.log" >&2; exit 1; }
echo "building dlock in $build_dir (log: $build_dir/build.log)" >&2
cmake --build "$build_dir" -j "$(nproc)" >"$build_dir/build.log" 2>&1 \
  || { tail -n 60 "$build_dir/build.log" >&2; exit 1; }
echo "$build_dir"
