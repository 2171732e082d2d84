#!/usr/bin/env bash
# dlock's test command: installs what is missing, checks the code's shape
# (scripts/lint.sh), builds, starts the private MariaDB, runs every test, and
# stops the database again.
#
#   scripts/test.sh [--sanitize address|thread] [--filter REGEX] [--jobs N]
#
#   --sanitize address   build and run under AddressSanitizer + UBSan
#   --sanitize thread    build and run under ThreadSanitizer
#   --filter REGEX       only the ctest tests whose names match
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize=""
filter=""
jobs="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

"$root/scripts/install-deps.sh"
# The shape rules (function and file lengths, layers) before anything is built.
"$root/scripts/lint.sh"
build_args=()
[ -n "$sanitize" ] && build_args+=(--sanitize "$sanitize")
build_dir="$(bash "$root/scripts/build.sh" "${build_args[@]}" | tail -n 1)"

# Two private servers: the plain one most tests use, and a TLS-only one
# (scripts/db.sh --tls) for the TLS tests.
started_db=0
started_tls_db=0
cleanup() {
  [ "$started_db" = 1 ] && "$root/scripts/db.sh" stop >/dev/null || true
  [ "$started_tls_db" = 1 ] && "$root/scripts/db.sh" --tls stop >/dev/null || true
}
trap cleanup EXIT
if ! "$root/scripts/db.sh" status; then
  "$root/scripts/db.sh" start
  started_db=1
fi
if ! "$root/scripts/db.sh" --tls status; then
  "$root/scripts/db.sh" --tls start
  started_tls_db=1
fi

export DLOCK_TEST_URL="$("$root/scripts/db.sh" url)"
export DLOCK_TEST_TLS_URL="$("$root/scripts/db.sh" --tls url)"
export DLOCK_TEST_TLS_DIR="$("$root/scripts/db.sh" --tls certs)"
export DLOCK_TEST_DB_PID="$("$root/scripts/db.sh" pid)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp}"

# The "cluster" label needs the Galera test bed: scripts/cluster-test.sh runs it.
ctest_args=(--test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 300 -LE cluster)
[ -n "$filter" ] && ctest_args+=(-R "$filter")
ctest "${ctest_args[@]}"
