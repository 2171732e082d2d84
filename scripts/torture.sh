#!/usr/bin/env bash
# Fault-injection run: worker processes take dlock locks and do fenced
# read-modify-writes on a resource row while a nemesis kills and pauses
# holders, pauses and kills the database, kills connections and shrinks
# wait_timeout; then a checker reads the audit trail and the histories.
#
#   scripts/torture.sh [--quick] [--faults LIST] [--duration SECONDS]
#                      [--workers K] [--multi-workers M] [--fair-workers F] [--guarded-workers G]
#                      [--herd-workers H]
#                      [--threads T] [--names N]
#                      [--cluster [--placement one|several]]
#
# Fault kinds (comma-separated, default all): kill-holder, pause-holder,
# pause-db, kill-db, kill-conns, idle-timeout, foreign-lock, kill-dlock,
# partition-client (one worker process cut off from the database for
# 1-10 s: every connection of each library worker goes through black-hole
# proxies of its own, which forward nothing and close nothing while cut),
# drop-replies (the same, but requests get through and every answer is
# thrown away), pool, shared-id. Besides the library workers, a CLI
# workload runs its critical sections under `dlock run` (kill-dlock kills
# those dlock processes), and a guarded workload (transactions on a counter
# in the lock table's database, each with its hold's guard last and no
# fence check anywhere; the control drops the guard), and a herd workload
# (8 clients per worker, each its own DatabaseDistributedLock, waiting in
# turn on lock "h0" and fair lock "h1"). Besides exclusion,
# fences and lost updates, the
# checker proves every loss was told before the hold was granted to
# another owner (loss order; holders stopped or killed excused while they
# cannot run) and no wake was lost (a herd name left free for 8 s while a
# client waited for it, outside a fault that stops holders). --quick runs 110 s plus a 40 s control run (under 4
# minutes); the default runs 600 s.
#
# --cluster runs the same workload against the Galera test bed of
# scripts/cluster.sh (started if it is not running, and stopped again
# afterwards if this script started it): node faults (kill-node, sst-node,
# pause-node, and isolate-node: nftables drops every packet between one
# node and the other two, no process is touched; the cut-off node must stop
# serving and its clients fail over) instead of pause-db and kill-db, and
# workers spread over the proxy and every node (--placement several, the
# default) or all on node 1 (--placement one). --quick then runs 200 s.
# Exits non-zero on any violation, or if the control run (no fence guard,
# losses written down 5 s late) fails to lose updates or to break the loss
# order. Histories and worker logs land in BUILD/torture/;
# DLOCK_BUILD_DIR=DIR skips the install-and-build step and uses DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${DLOCK_BUILD_DIR:-}"
if [ -z "$build_dir" ]; then
  "$root/scripts/install-deps.sh"
  build_dir="$(bash "$root/scripts/build.sh" | tail -n 1)"
fi
cluster=0
args=()
for a in "$@"; do
  if [ "$a" = "--cluster" ]; then cluster=1; else args+=("$a"); fi
done
out="$build_dir/torture"
mkdir -p "$out"
if [ "$cluster" = 1 ]; then
  started_cluster=0
  if ! "$root/scripts/cluster.sh" status >/dev/null 2>&1; then
    "$root/scripts/cluster.sh" start
    started_cluster=1
  fi
  trap '[ "$started_cluster" = 1 ] && "$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true' EXIT
  "$build_dir/tests/dlock_torture" --cluster "$root/scripts/cluster.sh" \
    --dlock "$build_dir/cli/dlock" --out "$out/cluster" ${args[@]+"${args[@]}"}
  exit $?
fi
started_db=0
if ! "$root/scripts/db.sh" status >/dev/null 2>&1; then
  "$root/scripts/db.sh" start
  started_db=1
fi
trap '[ "$started_db" = 1 ] && "$root/scripts/db.sh" stop >/dev/null 2>&1 || true' EXIT
"$build_dir/tests/dlock_torture" --url "$("$root/scripts/db.sh" url)" --db-script "$root/scripts/db.sh" \
  --dlock "$build_dir/cli/dlock" --out "$out" ${args[@]+"${args[@]}"}
