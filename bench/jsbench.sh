#!/usr/bin/env bash
# bench/jsbench.sh — bench/jsbench (one nats.go jetstream program: async
# publish with PubAcks, Consume with explicit acks) against `fibril serve`
# and nats-server -js (default sync; with --always also sync_interval:
# always), alternating in one run, REPS reps each, medians. Each run gets a
# fresh server on a free loopback port with data in a temp dir; jsbench
# reads the server's CPU from /proc, so every line also says the client's
# and the server's CPU µs per message in each phase.
#
#   bash bench/jsbench.sh                    # 3 reps, 100k x 1 KiB
#   bash bench/jsbench.sh --reps 5 --n 200000 --always
#
# Servers are stopped by PID; a trap stops, by PID, whatever this script
# started that still runs when it exits.
set -u
cd "$(dirname "$0")/.."
REPS=3; N=100000; ALWAYS=0; OUT=/tmp/fibril-jsbench
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift ;;
    --n) N=$2; shift ;;
    --always) ALWAYS=1 ;;
    --out) OUT=$2; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "jsbench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
export PATH="$PATH:$(go env GOPATH)/bin"
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT
command -v nats-server >/dev/null || go install github.com/nats-io/nats-server/v2@v2.15.3
go build -o "$OUT/fibril" ./cmd/fibril || exit 1
go build -o "$OUT/jsbench" ./bench/jsbench || exit 1

freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# start_server NAME: sets SPID, URL and DATA.
start_server() {
  DATA=$(mktemp -d "$OUT/data.XXXX")
  case "$1" in
    fibril)
      "$OUT/fibril" serve --listen 127.0.0.1:0 --data "$DATA" --ready-json --log-level warn >"$DATA/ready" 2>"$DATA/log" &
      SPID=$!
      for _ in $(seq 200); do grep -q '"addr"' "$DATA/ready" 2>/dev/null && break; sleep 0.05; done
      URL="nats://$(sed -n 's/.*"addr":"\([^"]*\)".*/\1/p' "$DATA/ready")" ;;
    *)
      local port conf; port=$(freeport); conf="$DATA/js.conf"
      echo "jetstream { store_dir: \"$DATA/js\" }" >"$conf"
      [ "$1" = nats-always ] && echo "jetstream { store_dir: \"$DATA/js\", sync_interval: always }" >"$conf"
      nats-server -a 127.0.0.1 -p "$port" -js -c "$conf" >"$DATA/log" 2>&1 &
      SPID=$!
      URL="nats://127.0.0.1:$port"
      for _ in $(seq 200); do grep -q 'Server is ready' "$DATA/log" 2>/dev/null && break; sleep 0.05; done ;;
  esac
  PIDS+=("$SPID")
}
stop_server() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; rm -rf "$DATA"; }

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*$1 \([0-9.]*\) msg\/s (client \([0-9.]*\) µs\/msg, server \([0-9.]*\) µs\/msg).*/\\$2/p"; }

WHO="fibril nats"
[ "$ALWAYS" = 1 ] && WHO="$WHO nats-always"
declare -A R
echo "bench/jsbench, $N x 1 KiB, $REPS reps alternating, $(nproc) vCPUs, $(date -u +%FT%TZ)"
for rep in $(seq "$REPS"); do
  order=$WHO
  [ $((rep % 2)) -eq 0 ] && order=$(echo "$WHO" | tr ' ' '\n' | tac | tr '\n' ' ')
  for who in $order; do
    start_server "$who"
    line=$(timeout 600 "$OUT/jsbench" -url "$URL" -n "$N" -pid "$SPID" 2>&1)
    stop_server
    echo "  $who: $line"
    for ph in publish consume; do
      for k in 1 2 3; do R[$who.$ph.$k]="${R[$who.$ph.$k]:-} $(echo "$line" | field "$ph" "$k")"; done
    done
  done
done
echo
printf '| server | publish msg/s | consume msg/s | client µs/msg pub / con | server µs/msg pub / con |\n| --- | ---: | ---: | ---: | ---: |\n'
for who in $WHO; do
  m() { echo "${R[$who.$1.$2]}" | median; }
  printf '| %s | %.0f | %.0f | %.2f / %.2f | %.2f / %.2f |\n' "$who" "$(m publish 1)" "$(m consume 1)" \
    "$(m publish 2)" "$(m consume 2)" "$(m publish 3)" "$(m consume 3)"
done
fp=$(echo "${R[fibril.publish.1]}" | median); np=$(echo "${R[nats.publish.1]}" | median)
fc=$(echo "${R[fibril.consume.1]}" | median); nc=$(echo "${R[nats.consume.1]}" | median)
awk -v a="$fp" -v b="$np" -v c="$fc" -v d="$nc" 'BEGIN { printf "Fibril / nats-server default: publish %.2fx, consume %.2fx\n", a/b, c/d }'
