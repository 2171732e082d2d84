#!/usr/bin/env bash
# dlock's main job: installs what is missing, builds, starts the private
# MariaDB, and runs the demo: two worker processes contend for one lock and
# append fenced lines to a shared log; the log is checked at the end (turns
# never overlap, fences strictly increase). The database is stopped after.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

"$root/scripts/install-deps.sh"
build_dir="$(bash "$root/scripts/build.sh" | tail -n 1)"
started_db=0
if ! "$root/scripts/db.sh" status; then
  "$root/scripts/db.sh" start
  started_db=1
fi
cleanup() { [ "$started_db" = 1 ] && "$root/scripts/db.sh" stop >/dev/null || true; }
trap cleanup EXIT

# A short poll, so a release in one process is noticed quickly by the other.
url="$("$root/scripts/db.sh" url)?table=demo_lock&poll_interval_ms=100"
work="$root/.dlock/demo"
rm -rf "$work" && mkdir -p "$work"
log="$work/shared.log"
: >"$log"

echo
echo "== Two processes, one lock: each takes 'demo:shared-log' with std::lock_guard"
echo "   and appends 'fence worker round' to $log"
"$build_dir/examples/contention_demo" "$url" alice 4 "$log" &
a=$!
"$build_dir/examples/contention_demo" "$url" bob 4 "$log" &
b=$!
wait "$a"
wait "$b"

echo
echo "== The shared log"
cat "$log"
lines=$(wc -l <"$log")
if [ "$lines" -eq 8 ] && sort -n -c "$log" 2>/dev/null && [ "$(cut -d' ' -f1 "$log" | sort -u | wc -l)" -eq 8 ]; then
  echo "== OK: 8 turns, fences strictly increasing, no turn shared"
else
  echo "== FAILED: the log shows overlapping or out-of-order turns" >&2
  exit 1
fi
