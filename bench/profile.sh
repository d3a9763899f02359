#!/usr/bin/env bash
# bench/profile.sh — CPU and allocation profiles of Fibril under the compare
# workloads. fibril-bench --embed runs the server inside the bench process
# (same code as `fibril serve`, options at their defaults) so pprof sees it;
# the profile therefore also holds the bench clients: read the server part
# with the focus regexps below.
#
#   bash bench/profile.sh [OUT]     # default OUT=/tmp/fibril-profile; about 1 minute
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/fibril-profile}
export PATH="$PATH:/usr/local/go/bin"
mkdir -p "$OUT"
go build -o "$OUT/fibril-bench" ./cmd/fibril-bench
run() {  # NAME ARGS...
  local name=$1; shift
  echo "== $name: fibril-bench --embed $*"
  "$OUT/fibril-bench" --embed --progress 0 --cpuprofile "$OUT/$name.cpu" --memprofile "$OUT/$name.mem" \
    --trace "$OUT/$name.trace" "$@" \
    | grep -E 'publish|acked|latency|verify'
  {
    echo "### $name: CPU, whole process (server + clients), top 30 by cumulative"
    go tool pprof -top -cum -nodecount=30 "$OUT/fibril-bench" "$OUT/$name.cpu" 2>/dev/null | sed -n '1,40p'
    echo "### $name: CPU inside the server (focus fibril/server), top 25 flat"
    go tool pprof -top -focus='fibril/server|gnet' -nodecount=25 "$OUT/fibril-bench" "$OUT/$name.cpu" 2>/dev/null | sed -n '1,35p'
    echo "### $name: allocated bytes, top 15"
    go tool pprof -sample_index=alloc_space -top -nodecount=15 "$OUT/fibril-bench" "$OUT/$name.mem" 2>/dev/null | sed -n '1,25p'
    # What goroutines wait for (from the execution trace): a publisher
    # blocked on its confirm window, an idle actor, a busy syncer.
    for k in sync syscall; do
      go tool trace -pprof=$k "$OUT/$name.trace" > "$OUT/$name.$k.pprof" 2>/dev/null || continue
      echo "### $name: time blocked ($k), top 15 cumulative"
      go tool pprof -top -cum -nodecount=15 "$OUT/$name.$k.pprof" 2>/dev/null | sed -n '1,22p'
    done
  } > "$OUT/$name.txt"
  echo "   -> $OUT/$name.txt"
}
run w1 --msgs 200000 --size 1024 --durability group
run w2 --msgs 200000 --size 1024 --pubs 4 --subs 4 --partitions 4 --durability group
run w3 --msgs 400000 --size 16 --durability group
run w4 --msgs 300000 --size 1024 --durability group --backlog
run w5 --mode plain --msgs 1000000 --size 1024
