#!/usr/bin/env bash
# Builds dlock's libFuzzer targets with clang (ASan+UBSan) and runs each one
# for a fixed time from its seed corpus.
#
#   scripts/fuzz.sh [--seconds N]     (default 20 per target)
#
# Targets: fuzz_from_url (Options::from_url), fuzz_validation (lock names,
# leases, table names against their stated rules), fuzz_duration (the dlock
# command's duration parser), fuzz_guard_statement (the guard statement
# builder: hostile names only ever as hex literals). A crash, a hang (over 5 s on one input), a
# leak, an exception other than std::invalid_argument, or an accepted input
# that breaks the rule fails the run; the reproducer lands in build-fuzz/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=20
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

"$root/scripts/install-deps.sh"
need=()
command -v clang++ >/dev/null 2>&1 || need+=(clang)
dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" || need+=(libclang-rt-14-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "fuzz.sh: installing ${need[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
fi

build_dir="$root/build-fuzz"
mkdir -p "$build_dir"
# The library itself is instrumented for coverage (fuzzer-no-link) and
# checked by ASan+UBSan; only the targets link libFuzzer's main.
CC=clang CXX=clang++ cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_WERROR=ON \
  -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_CLI=OFF \
  -DDLOCK_INSTALL=OFF -DDLOCK_BUILD_FUZZERS=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log" >&2; exit 1; }
echo "fuzz.sh: building in $build_dir (log: $build_dir/build.log)"
cmake --build "$build_dir" -j "$(nproc)" >"$build_dir/build.log" 2>&1 || { tail -n 60 "$build_dir/build.log" >&2; exit 1; }

status=0
for target in fuzz_from_url fuzz_validation fuzz_duration fuzz_guard_statement; do
  corpus="$build_dir/corpus/$target"
  mkdir -p "$corpus"
  cp -n "$root/tests/fuzz/seeds/$target/"* "$corpus/" 2>/dev/null || true
  echo "fuzz.sh: $target for ${seconds}s"
  if (cd "$build_dir" && "./tests/fuzz/$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 \
        -print_final_stats=1 "$corpus" >"$build_dir/$target.log" 2>&1); then
    grep -E "stat::number_of_executed_units" "$build_dir/$target.log" | sed "s/^/  /" || true
  else
    echo "fuzz.sh: $target FAILED (log: $build_dir/$target.log)" >&2
    tail -n 30 "$build_dir/$target.log" >&2
    status=1
  fi
done
exit $status
