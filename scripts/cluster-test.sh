#!/usr/bin/env bash
# The library's database suites against the Galera test bed
# (scripts/cluster.sh): every client of a run writes through one node, the
# single-writer setup dlock recommends on a cluster, either straight to node 1
# or through HAProxy; then the failover test (tests/cluster_test.cpp), which
# kills node 1 under clients on a multi-host URL and behind HAProxy and
# prints the availability it measured.
#
#   scripts/cluster-test.sh [--via node|proxy|both|failover|all] [--filter REGEX] [--jobs N]
#
#   --via      node: node 1's port; proxy: HAProxy's; both: one run each;
#              failover: the failover test alone; all (default): all three
#   --filter   only the ctest tests whose names match (default: every db and cli suite)
#   --jobs     ctest parallelism (default: the number of cores)
#
# Left out, with the reason: the suites that stop, pause or restart "the"
# server through scripts/db.sh (server_pause_test: they would act on the
# private single server, not on the cluster), the TLS suites (label tls:
# they run against the private TLS-only server of scripts/db.sh --tls), and
# IPv6 cases (the cluster listens on 127.0.0.1 only). Results go to
# build/cluster-test/<via>.log; the exit status is 0 only if every run
# passed. The cluster is left running (scripts/cluster.sh stop ends it).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
via=all
filter=""
jobs="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    --via) via="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    *) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
case "$via" in node|proxy|both|failover|all) ;; *) echo "cluster-test.sh: --via must be node, proxy, both, failover or all" >&2; exit 2 ;; esac

build_dir="$(bash "$root/scripts/build.sh" | tail -n 1)"
bash "$root/scripts/cluster.sh" start

out="$build_dir/cluster-test"
mkdir -p "$out"
exclude='^ServerPause\.|^ServerRestart\.|IPv6|Ipv6'
status=0
run_one() {
  local name="$1" url
  case "$name" in
    node) url="$(bash "$root/scripts/cluster.sh" url 1)" ;;
    proxy) url="$(bash "$root/scripts/cluster.sh" url proxy)" ;;
  esac
  local args=(--test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 300 -L "db|cli" -LE tls -E "$exclude")
  [ -n "$filter" ] && args+=(-R "$filter")
  echo "== cluster-test via $name: $url"
  local started=$SECONDS rc=0
  DLOCK_TEST_URL="$url" ctest "${args[@]}" >"$out/$name.log" 2>&1 || rc=$?
  grep -E "tests passed|tests failed|^\s+[0-9]+ - " "$out/$name.log" || true
  echo "== via $name: $( [ "$rc" -eq 0 ] && echo PASS || echo FAIL ) in $((SECONDS - started)) s (log: $out/$name.log)"
  [ "$rc" -eq 0 ] || status=1
}
run_failover() {
  echo "== cluster-test failover: kill -9 node 1 under a multi-host URL and HAProxy"
  local started=$SECONDS rc=0
  DLOCK_TEST_URL="$(bash "$root/scripts/cluster.sh" url 1)" DLOCK_CLUSTER_SCRIPT="$root/scripts/cluster.sh" \
    ctest --test-dir "$build_dir" --output-on-failure --verbose --timeout 300 -L cluster >"$out/failover.log" 2>&1 || rc=$?
  grep -E "availability after|after the release|handoffs on node|tests passed|tests failed" "$out/failover.log" | sed 's/^[0-9]*: //' || true
  echo "== failover: $( [ "$rc" -eq 0 ] && echo PASS || echo FAIL ) in $((SECONDS - started)) s (log: $out/failover.log)"
  [ "$rc" -eq 0 ] || status=1
}
case "$via" in
  node) run_one node ;;
  proxy) run_one proxy ;;
  both) run_one node; run_one proxy ;;
  failover) run_failover ;;
  all) run_one node; run_one proxy; run_failover ;;
esac
exit $status
