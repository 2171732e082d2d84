#!/usr/bin/env bash
# dlock's main job: installs what is missing, builds, starts the private
# MariaDB, and tells a short story in four acts. The database is stopped after.
#
#   Act 1 (shell): three workers on three "hosts" (separate processes, each a
#   loop of `dlock run`) share one ledger file. Each turn appends its fence.
#   One holder is killed with SIGKILL mid-turn, as if its machine died; the
#   next worker takes over once the lease runs out, with a higher fence.
#   `dlock status` shows the lock while this happens. At the end the ledger
#   is checked: no two turns overlap, fences strictly increase.
#
#   Act 2 (C++): two processes of examples/contention_demo take turns with
#   std::lock_guard<dlock::Lock> and a fenced write; `dlock top --once`
#   shows the holder mid-turn.
#
#   Act 3 (C++, asynchronous): examples/async_demo, coroutines on one thread.
#
#   Act 4 (shell): six jobs share a semaphore of two permits through
#   `dlock run --permits 2`; each records entering and leaving its slot, and
#   the log is checked: never more than two inside, one per slot.
#   Act 5 (shell): a read-write lock through `dlock run --shared` and
#   `--exclusive`: four readers overlap, two writers each run alone, and a
#   writer that starts waiting while readers keep coming gets in behind the
#   reads already granted; the log is checked: no write beside a read or a
#   write, and reads did overlap.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

"$root/scripts/install-deps.sh"
build_dir="$(bash "$root/scripts/build.sh" | tail -n 1)"
dlock="$build_dir/cli/dlock"
started_db=0
if ! "$root/scripts/db.sh" status; then
  "$root/scripts/db.sh" start
  started_db=1
fi
work="$root/.dlock/demo"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
  [ "$started_db" = 1 ] && "$root/scripts/db.sh" stop >/dev/null || true
}
trap cleanup EXIT

# A 3 s lease (renewed every second by the watchdog) keeps the story short.
export DLOCK_URL="$("$root/scripts/db.sh" url)?table=demo_lock&watchdog_timeout_ms=3000&poll_interval_ms=200"
rm -rf "$work" && mkdir -p "$work"
ledger="$work/ledger.txt"
: >"$ledger"

# Bold headings on a terminal; plain text in a log file or a pipe.
if [ -t 1 ]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi

say "dlock init: create the lock table (idempotent)"
"$dlock" init

# One turn: runs under `dlock run`, so DLOCK_FENCE is set. The ledger is the
# protected resource: it refuses a write whose fence is older than the last.
cat >"$work/turn.sh" <<'EOF'
#!/bin/sh
ledger="$1"; who="$2"
echo "$$" >"$(dirname "$ledger")/holder.pid"
last=$(tail -n 1 "$ledger" | cut -d' ' -f1)
if [ -n "$last" ] && [ "$DLOCK_FENCE" -lt "$last" ]; then
  echo "   $who: ledger refused stale fence $DLOCK_FENCE"; exit 0
fi
echo "$DLOCK_FENCE $who start" >>"$ledger"
echo "   $who: turn with fence $DLOCK_FENCE"
sleep 1
echo "$DLOCK_FENCE $who end" >>"$ledger"
EOF
chmod +x "$work/turn.sh"

say "Three workers, one lock 'demo:ledger', two turns each"
for who in alice bob carol; do
  setsid sh -c "for i in 1 2; do '$dlock' run demo:ledger -- '$work/turn.sh' '$ledger' $who; sleep 0.3; done" &
  pids+=($!)
  disown $!  # no job notices from the shell when one is killed
done

# Wait for the third turn to begin, then kill its worker (the loop and its
# dlock, the worker's session) with SIGKILL: no unlock, no goodbye. The turn
# script runs in a process group of its own under dlock; it dies with its
# dlock, so it cannot go on writing once the lease runs out.
until [ "$(grep -c ' start$' "$ledger")" -ge 3 ]; do sleep 0.05; done
sleep 0.3
say "dlock status, mid-turn"
"$dlock" status demo:ledger
victim_fence=$(tail -n 1 "$ledger" | cut -d' ' -f1)
victim=$(tail -n 1 "$ledger" | cut -d' ' -f2)
victim_turn=$(cat "$work/holder.pid")
victim_session=$(ps -o sid= -p "$victim_turn" | tr -d ' ')
say "kill -9 $victim's worker and its dlock mid-turn (fence $victim_fence): no unlock will ever come"
kill -KILL -- "-$victim_session"
for _ in $(seq 1 100); do kill -0 "$victim_turn" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$victim_turn" 2>/dev/null; then
  say "FAILED: $victim's turn outlived its dlock" >&2
  exit 1
fi
echo "   $victim's turn died with its dlock"
killed_at=$(date +%s%N)
until [ "$(awk -v f="$victim_fence" '$1 > f && $3 == "start"' "$ledger" | wc -l)" -ge 1 ]; do sleep 0.05; done
took_ms=$(( ($(date +%s%N) - killed_at) / 1000000 ))
next=$(awk -v f="$victim_fence" '$1 > f && $3 == "start" {print $2 " with fence " $1; exit}' "$ledger")
say "$next took over $took_ms ms later, once the dead holder's 3 s lease ran out"
"$dlock" status demo:ledger

for p in "${pids[@]}"; do
  while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
done
pids=()

say "The ledger"
cat "$ledger"
# Turns never overlap: each start is followed by its own end, except the
# killed turn's, which is followed by the next holder's start. Fences
# strictly increase from turn to turn.
if awk -v killed="$victim_fence" '
  $3 == "start" { if ((open != "" && open != killed) || $1 <= last) bad = 1; open = $1; last = $1; next }
  $3 == "end"   { if ($1 != open) bad = 1; open = ""; next }
  END { exit bad }' "$ledger"; then
  say "OK: $(grep -c ' start$' "$ledger") turns, none overlapping, fences strictly increasing; the killed turn was taken over"
else
  say "FAILED: the ledger shows overlapping or out-of-order turns" >&2
  exit 1
fi

say "Act 2, C++: two processes with std::lock_guard<dlock::Lock> and a fenced write"
cpp_log="$work/cpp.log"
: >"$cpp_log"
"$build_dir/examples/contention_demo" "$DLOCK_URL" alice 3 "$cpp_log" &
a=$!
"$build_dir/examples/contention_demo" "$DLOCK_URL" bob 3 "$cpp_log" &
b=$!
# What an operator sees meanwhile: one view of dlock top, taken while one
# of them holds the lock (a turn lasts 150 ms; a few tries catch one).
view=""
for _ in $(seq 1 60); do
  view=$("$dlock" top --once)
  case "$view" in *"1 hold "*) break ;; esac
  sleep 0.05
done
say "dlock top --once, mid-turn"
echo "$view" | sed 's/^/   /'
wait "$a"
wait "$b"
if [ "$(wc -l <"$cpp_log")" -eq 6 ] && sort -n -c "$cpp_log" && [ "$(cut -d' ' -f1 "$cpp_log" | sort -u | wc -l)" -eq 6 ]; then
  say "OK: 6 turns, fences strictly increasing"
else
  say "FAILED: the C++ log shows overlapping turns" >&2
  exit 1
fi

say "Act 3, asynchronous: 300 coroutines on one io_context thread, 5 names, co_await dlock::async_lock"
"$build_dir/examples/async_demo" "$DLOCK_URL" 300 5 3

say "Act 4, a semaphore: six jobs, two permits, dlock run --permits 2"
sem_log="$work/semaphore.log"
: >"$sem_log"
job_pids=()
for j in 1 2 3 4 5 6; do
  "$dlock" run --permits 2 printers -- sh -c \
    'echo "+ $DLOCK_SLOT job'"$j"'" >>"$0"; sleep 0.4; echo "- $DLOCK_SLOT job'"$j"'" >>"$0"' "$sem_log" &
  job_pids+=("$!")
done
sleep 0.2
"$dlock" status printers | sed 's/^/   /'
for p in "${job_pids[@]}"; do wait "$p"; done
if awk '
  $1 == "+" { inside++; if (inside > most) most = inside; if (busy[$2]) bad = 1; busy[$2] = 1; next }
  $1 == "-" { inside--; busy[$2] = 0 }
  END { if (NR != 12 || most > 2 || bad) exit 1; print most }' "$sem_log" >/dev/null; then
  say "OK: 6 jobs, at most 2 inside at once, never two in one slot"
else
  say "FAILED: the semaphore log shows more than two jobs inside" >&2
  cat "$sem_log" >&2
  exit 1
fi

say "Act 5, a read-write lock: readers share, a writer runs alone (dlock run --shared / --exclusive)"
rw_log="$work/rw.log"
: >"$rw_log"
rw_pids=()
reader() {
  "$dlock" run --shared catalog -- sh -c 'echo "+r $0" >>"$1"; sleep 0.5; echo "-r $0" >>"$1"' "$1" "$rw_log"
}
writer() {
  "$dlock" run --exclusive catalog -- sh -c 'echo "+w $0 $DLOCK_FENCE" >>"$1"; sleep 0.3; echo "-w $0" >>"$1"' "$1" "$rw_log"
}
for r in reader1 reader2; do reader "$r" & rw_pids+=("$!"); done
sleep 0.2
writer writer1 & rw_pids+=("$!")   # waits for the two reads; readers arriving now queue behind it
sleep 0.1
for r in reader3 reader4; do reader "$r" & rw_pids+=("$!"); done
writer writer2 & rw_pids+=("$!")
sleep 0.1
"$dlock" status catalog | sed 's/^/   /'
for p in "${rw_pids[@]}"; do wait "$p"; done
cat "$rw_log" | sed 's/^/   /'
if awk '
  $1 == "+r" { if (writing) bad = 1; reading++; if (reading > most) most = reading; next }
  $1 == "-r" { reading--; next }
  $1 == "+w" { if (writing || reading) bad = 1; writing = 1; next }
  $1 == "-w" { writing = 0 }
  END { if (NR != 12 || bad || most < 2) exit 1 }' "$rw_log"; then
  say "OK: 4 reads (overlapping) and 2 writes, no write beside another read or write"
else
  say "FAILED: the read-write log shows a write beside a read or a write" >&2
  exit 1
fi
