#!/usr/bin/env bash
# Fault-injection run: worker processes take dlock locks and do fenced
# read-modify-writes on a resource row while a nemesis kills and pauses
# holders, pauses and kills the database, kills connections and shrinks
# wait_timeout; then a checker reads the audit trail and the histories.
#
#   scripts/torture.sh [--quick] [--faults LIST] [--duration SECONDS]
#                      [--workers K] [--threads T] [--names N]
#
# Fault kinds (comma-separated, default all): kill-holder, pause-holder,
# pause-db, kill-db, kill-conns, idle-timeout, foreign-lock, kill-dlock,
# pool, shared-id. Besides the library workers, a CLI workload runs its
# critical sections under `dlock run` (kill-dlock kills those dlock
# processes). --quick runs 90 s plus a 40 s control run (under 3 minutes);
# the default runs 600 s.
# Exits non-zero on any violation, or if the control run (no fence guard)
# fails to lose updates. Histories and worker logs land in BUILD/torture/;
# DLOCK_BUILD_DIR=DIR skips the install-and-build step and uses DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${DLOCK_BUILD_DIR:-}"
if [ -z "$build_dir" ]; then
  "$root/scripts/install-deps.sh"
  build_dir="$(bash "$root/scripts/build.sh" | tail -n 1)"
fi
started_db=0
if ! "$root/scripts/db.sh" status >/dev/null 2>&1; then
  "$root/scripts/db.sh" start
  started_db=1
fi
trap '[ "$started_db" = 1 ] && "$root/scripts/db.sh" stop >/dev/null 2>&1 || true' EXIT
out="$build_dir/torture"
mkdir -p "$out"
"$build_dir/tests/dlock_torture" --url "$("$root/scripts/db.sh" url)" --db-script "$root/scripts/db.sh" \
  --dlock "$build_dir/cli/dlock" --out "$out" "$@"
