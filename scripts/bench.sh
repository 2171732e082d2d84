#!/usr/bin/env bash
# Benchmarks dlock next to the physical floor, the seed design and GET_LOCK,
# side by side in one run against the private MariaDB (durable settings).
#
#   scripts/bench.sh [--quick] [--only SCENARIO,...] [--out DIR]
#
# Writes bench/results/latest.md, latest.json, throughput.png and
# handoff.png. The default mode takes under 10 minutes; --quick (under 2)
# is CI's smoke check: it exits non-zero if a statement-count goal is missed.
#
#   scripts/bench.sh --cluster [--quick]
#
# Single-writer mode on the Galera test bed (scripts/cluster.sh; started if
# it is not running, stopped afterwards if this script started it): the
# uncontended cycle and cross-client handoffs with every client on node 1,
# beside the private single server in the same run. Writes
# bench/results/cluster/latest.md and latest.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Arguments go to dlock_bench as they are (--quick, --only, --out).

"$root/scripts/install-deps.sh"
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "bench.sh: installing gnuplot-nox for the charts"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null \
    || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null; }
fi
build_dir="$(bash "$root/scripts/build.sh" --release --build-dir "$root/build-release" | tail -n 1)"
started_db=0
started_tls_db=0
stop_servers() {
  [ "$started_db" = 1 ] && "$root/scripts/db.sh" stop >/dev/null || true
  [ "$started_tls_db" = 1 ] && "$root/scripts/db.sh" --tls stop >/dev/null || true
}
trap stop_servers EXIT
if ! "$root/scripts/db.sh" status; then
  "$root/scripts/db.sh" start
  started_db=1
fi

out="$root/bench/results"
args=()
cluster=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --cluster) cluster=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ "$cluster" = 1 ]; then
  [ "$out" = "$root/bench/results" ] && out="$root/bench/results/cluster"
  started_cluster=0
  if ! "$root/scripts/cluster.sh" status >/dev/null 2>&1; then
    "$root/scripts/cluster.sh" start
    started_cluster=1
  fi
  trap 'stop_servers; [ "$started_cluster" = 1 ] && "$root/scripts/cluster.sh" stop >/dev/null || true' EXIT
  mkdir -p "$out"
  "$build_dir/bench/dlock_bench" --url "$("$root/scripts/db.sh" url)" --out "$out" --only cluster \
    --cluster-url "$("$root/scripts/cluster.sh" url 1)" ${args[@]+"${args[@]}"}
  exit $?
fi
mkdir -p "$out"
# The TLS scenario's encrypted sessions go to the TLS-only test server.
if ! "$root/scripts/db.sh" --tls status; then
  "$root/scripts/db.sh" --tls start
  started_tls_db=1
fi
"$build_dir/bench/dlock_bench" --url "$("$root/scripts/db.sh" url)" --tls-url "$("$root/scripts/db.sh" --tls url)" \
  --out "$out" ${args[@]+"${args[@]}"}
# The charts need both scenarios' data (a run with --only may have neither).
if command -v gnuplot >/dev/null 2>&1 && [ -f "$out/throughput.dat" ] && [ -f "$out/handoff.dat" ]; then
  gnuplot -e "dir='$out'" "$root/bench/plot.gp" && echo "charts: $out/throughput.png $out/handoff.png"
fi
if command -v gnuplot >/dev/null 2>&1 && [ -f "$out/herd.dat" ]; then
  gnuplot -e "dir='$out'" "$root/bench/plot_herd.gp" && echo "chart: $out/herd.png"
fi
