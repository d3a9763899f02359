#!/usr/bin/env bash
# bench/natsbench.sh — `nats bench` core pub/sub (the stock `nats` CLI,
# natscli v0.5.0) against `fibril serve` and nats-server v2.15.3, the two
# alternating in one run, on this machine. For each size it runs REPS pairs
# of (subscriber, publisher) of MSGS messages on one subject and prints the
# medians of the subscriber's msgs/s (every message received end to end),
# the ratio Fibril / nats-server, and the runs cut off (a client that did
# not finish, or exited non-zero). Then a multi-subject flood against Fibril
# (`nats bench pub --multisubject`, 1,000 and 100,000 subjects): the topics
# created, data on disk, RSS and open files it leaves.
#
#   bash bench/natsbench.sh                      # 3 reps, 1M messages, 16 B and 1 KiB
#   bash bench/natsbench.sh --reps 5 --msgs 200000 --sizes "16 1024 4096"
#   bash bench/natsbench.sh --quick              # 1 rep, 100k messages: a smoke run
#   bash bench/natsbench.sh --no-flood --variant "loops2=--event-loops 2" \
#        --variant "old=/tmp/fibril-old"         # levers, each against nats-server
#
# --variant NAME=[BINARY] [SERVE ARGS] adds a Fibril build or setting to the
# rotation (BINARY: a path starting with /; default the build of this tree),
# printed as its own row against the same nats-server runs; the plain
# "fibril" row is always run. --cpu adds the CPU seconds (from /proc) of the
# server and of both clients, medians, to see what bounds a rate.
# --profile DIR writes a CPU profile of every Fibril run to
# DIR/NAME-SIZE-N.prof (go tool pprof BINARY FILE).
#
# Servers start fresh for every run on a free loopback port with data in a
# temp dir, and are stopped by PID; a trap kills, by PID, whatever this
# script started that still runs when it exits. Missing tools are installed
# with `go install` at the versions above. Exits 1 if any run was cut off.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REPS=3; MSGS=1000000; SIZES="16 1024"; OUT=/tmp/fibril-natsbench; FLOOD=1; CPU=0
VARIANTS=(); declare -A VARCMD=(); PROFILE=""; SIZE=flood
NATS_VERSION=v2.15.3; NATSCLI_VERSION=v0.5.0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) REPS=1; MSGS=100000 ;;
    --reps) REPS=$2; shift ;;
    --msgs) MSGS=$2; shift ;;
    --sizes) SIZES=$2; shift ;;
    --out) OUT=$2; shift ;;
    --no-flood) FLOOD=0 ;;
    --cpu) CPU=1 ;;
    --profile) PROFILE=$2; shift ;;
    --variant) VARIANTS+=("${2%%=*}"); VARCMD[${2%%=*}]=${2#*=}; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "natsbench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
export PATH="$PATH:$(go env GOPATH)/bin"
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

command -v nats-server >/dev/null || go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
command -v nats >/dev/null || go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION"
go build -o "$OUT/fibril" ./cmd/fibril || exit 1

freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# start_server NAME: sets SPID and URL. NAME is fibril, a variant or
# nats-server.
start_server() {
  local dir; dir=$(mktemp -d "$OUT/data.XXXX")
  if [ "$1" != nats-server ]; then
    local bin="$OUT/fibril" args=""
    if [ "$1" != fibril ]; then
      args=${VARCMD[$1]}
      case "$args" in /*) bin=${args%% *}; args=${args#"$bin"} ;; esac
    fi
    local prof=""
    if [ -n "$PROFILE" ]; then
      mkdir -p "$PROFILE"; NPROF=$((NPROF + 1)); prof="$PROFILE/$1-$SIZE-$NPROF.prof"
    fi
    # shellcheck disable=SC2086 # args are words
    FIBRIL_TEST_CPUPROFILE=$prof "$bin" serve $args --listen 127.0.0.1:0 --data "$dir" --ready-json --log-level warn >"$dir/ready" 2>"$dir/log" &
    SPID=$!
    for _ in $(seq 200); do grep -q '"addr"' "$dir/ready" 2>/dev/null && break; sleep 0.05; done
    URL="nats://$(sed -n 's/.*"addr":"\([^"]*\)".*/\1/p' "$dir/ready")"
  else
    local port; port=$(freeport)
    nats-server -a 127.0.0.1 -p "$port" >"$dir/log" 2>&1 &
    SPID=$!
    URL="nats://127.0.0.1:$port"
    for _ in $(seq 200); do nats -s "$URL" server check connection >/dev/null 2>&1 && break; sleep 0.05; done
  fi
  PIDS+=("$SPID")
  DATA=$dir
}
stop_server() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; rm -rf "$DATA"; }

NPROF=0

# run_pair NAME SIZE: sets RESULT to the subscriber's msgs/s, or CUT (not in
# a subshell, so the trap sees every PID it starts).
run_pair() {
  SIZE=$2
  start_server "$1"
  local sub="$OUT/sub.out" pub="$OUT/pub.out"
  local s0; s0=$(cputicks "$SPID")
  /usr/bin/time -f "%U %S" -o "$sub.cpu" timeout 120 nats -s "$URL" bench sub bench.x --msgs "$MSGS" --size "$2" --no-progress >"$sub" 2>&1 &
  local spid=$!
  PIDS+=("$spid")
  sleep 1 # the subscription is in place
  /usr/bin/time -f "%U %S" -o "$pub.cpu" timeout 120 nats -s "$URL" bench pub bench.x --msgs "$MSGS" --size "$2" --no-progress >"$pub" 2>&1
  local prc=$?
  wait "$spid"; local src=$?
  CPUS="$(awk -v a="$s0" -v b="$(cputicks "$SPID")" 'BEGIN {printf "%.2f", (b - a) / 100}') $(awk '{printf "%.2f", $1 + $2}' "$sub.cpu") $(awk '{printf "%.2f", $1 + $2}' "$pub.cpu")"
  stop_server
  local rate; rate=$(sed -n 's/.*subscriber stats: \([0-9,]*\) msgs\/sec.*/\1/p' "$sub" | tr -d ,)
  if [ $prc -ne 0 ] || [ $src -ne 0 ] || [ -z "$rate" ]; then
    RESULT=CUT; { echo "--- $1 $2 cut off (pub rc $prc, sub rc $src)"; tail -3 "$pub" "$sub"; } >>"$OUT/cut.log"
  else
    RESULT=$rate
  fi
}

# cputicks PID: user + system clock ticks of PID so far.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# fmedian: the median of decimal numbers on stdin.
fmedian() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else printf "%.2f", (a[NR/2]+a[NR/2+1])/2}'; }

median() { tr ' ' '\n' | grep -v '^$' | grep -v CUT | sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print int((a[NR/2]+a[NR/2+1])/2)}'; }

rm -f "$OUT/cut.log"
cuts=0
command -v /usr/bin/time >/dev/null || { echo "natsbench.sh: needs /usr/bin/time" >&2; exit 2; }
WHO=(fibril "${VARIANTS[@]}" nats-server)
echo "nats bench core pub/sub, $MSGS msgs, medians of $REPS (subscriber msgs/s; machine: $(nproc) vCPUs, $(date -u +%FT%TZ))"
if [ "$CPU" = 1 ]; then
  printf '| size | server | msgs/s | / nats-server | runs cut off | CPU s: server | sub | pub |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n'
else
  printf '| size | server | msgs/s | / nats-server | runs cut off |\n| --- | --- | --- | --- | --- |\n'
fi
for size in $SIZES; do
  declare -A R=() CS=() CB=() CP=()
  for rep in $(seq "$REPS"); do
    # Rotate the order each rep, so no server always runs first.
    k=$(( (rep - 1) % ${#WHO[@]} ))
    for who in "${WHO[@]:k}" "${WHO[@]:0:k}"; do
      run_pair "$who" "$size"
      R[$who]="${R[$who]:-} $RESULT"
      read -r a b c <<<"$CPUS"
      CS[$who]="${CS[$who]:-} $a"; CB[$who]="${CB[$who]:-} $b"; CP[$who]="${CP[$who]:-} $c"
    done
  done
  nm=$(echo "${R[nats-server]}" | median)
  for who in "${WHO[@]}"; do
    c=$(echo "${R[$who]}" | tr ' ' '\n' | grep -c CUT)
    cuts=$((cuts + c))
    m=$(echo "${R[$who]}" | median)
    ratio=$(awk -v a="$m" -v b="$nm" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "-" }')
    [ "$who" = nats-server ] && ratio=1
    row="| $size B | $who | $m | $ratio | $c |"
    if [ "$CPU" = 1 ]; then
      row="$row $(echo "${CS[$who]}" | fmedian) | $(echo "${CB[$who]}" | fmedian) | $(echo "${CP[$who]}" | fmedian) |"
    fi
    echo "$row"
    echo "  $size B $who:${R[$who]} (cpu server/sub/pub:${CS[$who]} /${CB[$who]} /${CP[$who]})" >>"$OUT/runs.log"
  done
  unset R CS CB CP
done

if [ "$FLOOD" = 1 ]; then
  echo
  echo "multi-subject flood against Fibril (16 B messages, no topic captures them):"
  printf '| subjects | msgs | topics | data on disk | RSS | open files |\n| --- | --- | --- | --- | --- | --- |\n'
  for subjects in 1000 100000; do
    msgs=$((subjects * 20 > 200000 ? 200000 : subjects * 20))
    start_server fibril
    timeout 300 nats -s "$URL" bench pub bench --multisubject --multisubjectmax "$subjects" --msgs "$msgs" --size 16 --no-progress >"$OUT/flood.out" 2>&1 || cuts=$((cuts + 1))
    sleep 1
    topics=$(printf 'CONNECT {"fibril":1}\r\nTOPIC LIST\r\n' | timeout 5 python3 -c '
import socket,sys
h,p=sys.argv[1].split(":");s=socket.create_connection((h,int(p)));s.settimeout(3)
s.recv(65536);s.sendall(sys.stdin.buffer.read());b=b""
while b.count(b"\n")<2:
  b+=s.recv(65536)
print(b.split(b"\n")[1].count(b",")+ (0 if b"[]" in b else 1))' "${URL#nats://}")
    disk=$(du -sh "$DATA" | cut -f1)
    rss=$(awk '/VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$SPID/status")
    fds=$(ls "/proc/$SPID/fd" | wc -l)
    printf '| %s | %s | %s | %s | %s | %s |\n' "$subjects" "$msgs" "$topics" "$disk" "$rss" "$fds"
    stop_server
  done
fi
if [ "$cuts" -gt 0 ]; then echo "runs cut off: $cuts (see $OUT/cut.log)"; exit 1; fi
